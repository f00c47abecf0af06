-- Dashboard history: each implementation's median with its distribution-free
-- 95% interval, copied per case at ingest so plots never read raw samples.
ALTER TABLE cases ADD COLUMN bands jsonb NOT NULL DEFAULT '{}';  -- impl -> [low_ns, high_ns]
