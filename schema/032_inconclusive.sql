-- A comparison whose estimate moved past its threshold without the evidence
-- to flag it is 'inconclusive', not 'unchanged' (docs/detection.md). The
-- constraint is checked without holding off writers while old rows are read.
ALTER TABLE comparisons DROP CONSTRAINT comparisons_status_check;
ALTER TABLE comparisons ADD CONSTRAINT comparisons_status_check
  CHECK (status IN ('regression', 'improvement', 'unchanged', 'inconclusive', 'no-baseline')) NOT VALID;
ALTER TABLE comparisons VALIDATE CONSTRAINT comparisons_status_check;
