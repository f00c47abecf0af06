-- The SM clock each sample ran at (run report measurements[].sm_mhz): an A/B
-- comparison is made at equal clock (docs/detection.md). NULL where the
-- bench did not report it and in older rows.
ALTER TABLE measurements ADD COLUMN sm_mhz double precision[];
