-- How a measurement's replicates make their locations (docs/run-report.md,
-- `replicate_location`): NULL is the 25%-trimmed mean, as every earlier row
-- was judged; 'minimum' is the fastest sample, for CPU times on a shared host.
ALTER TABLE measurements ADD COLUMN replicate_location text CHECK (replicate_location IN ('minimum'));
