-- A run that measured no candidate (every GPU stage skipped on a host
-- without a GPU, or no case selected) is never a pass: its verdict is
-- no-data, and it is nobody's baseline.
ALTER TABLE runs DROP CONSTRAINT runs_verdict_known;
ALTER TABLE runs ADD CONSTRAINT runs_verdict_known
  CHECK (verdict IN ('pending', 'pass', 'improvement', 'regression', 'failed', 'no-data'));
