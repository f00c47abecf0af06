-- Each stage's GPU time beside its wall time (run report stages[].gpu_seconds):
-- the run page draws the stages as a timeline. NULL in older rows.
ALTER TABLE stages ADD COLUMN gpu_seconds double precision CHECK (gpu_seconds >= 0);
