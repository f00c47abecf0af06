-- Samples, their clocks and replicate tags stored compactly: float4 keeps 24
-- bits of a sample (1e-7 relative: 0.1 ps of a 1 us kernel), far inside any
-- change a verdict can see, and a replicate index fits in 16 bits (reports
-- are held to 32767). A 10,000-case run of 3 implementations x 60 samples
-- stores about 1 KiB less per case (kw-server-bench, docs/PERFORMANCE.md).
-- Rewrites the table once.
ALTER TABLE measurements
  ALTER COLUMN samples_ns TYPE real[],
  ALTER COLUMN sm_mhz TYPE real[],
  ALTER COLUMN replicates TYPE smallint[];
