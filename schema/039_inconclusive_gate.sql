-- What the gate answers for a run whose only doubt is an inconclusive case
-- estimated far past its threshold (a 1.88x slowdown measured with two noisy
-- replicates): 'no-verdict' (measure again; the default), 'fail' (taken as
-- a regression) or 'pass' (as before). Far: a slowdown of inconclusive_factor
-- times the case's threshold or more.
ALTER TABLE projects ADD COLUMN inconclusive_gate text NOT NULL DEFAULT 'no-verdict'
  CHECK (inconclusive_gate IN ('pass', 'no-verdict', 'fail'));
ALTER TABLE projects ADD COLUMN inconclusive_factor double precision NOT NULL DEFAULT 3
  CHECK (inconclusive_factor >= 1 AND inconclusive_factor <= 1000);
