-- Dashboard history: each implementation's median with its distribution-free
-- 95% interval, copied per case at ingest so plots never read raw samples.
ALTER TABLE cases ADD COLUMN bands jsonb NOT NULL DEFAULT '{}';  -- impl -> [low_ns, high_ns]

-- The candidate's comparison status per case (regression, improvement, ...),
-- copied when the verdict is set, so a history query needs no join.
ALTER TABLE cases ADD COLUMN status text NOT NULL DEFAULT 'no-baseline';
