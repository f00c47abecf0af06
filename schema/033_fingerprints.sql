-- What each case ran (docs/detection.md, "Fingerprints"), and how a pull
-- request's case was decided without timing: identical to its base, or
-- identical and timed anyway (the audit whose misses the dashboard shows).
ALTER TABLE cases ADD COLUMN fingerprint jsonb;
ALTER TABLE cases ADD COLUMN identical_to_base boolean NOT NULL DEFAULT false;
ALTER TABLE cases ADD COLUMN audit boolean NOT NULL DEFAULT false;
-- The audit's and the identical cases of a project, for its miss rate.
CREATE INDEX cases_audited ON cases (project_id, run_id) WHERE audit;
CREATE INDEX cases_identical ON cases (project_id) WHERE identical_to_base;
