-- A case row's objects are written once, as the agent posted them (or, for
-- medians and bands, as kw-server summarized them), and read back whole or
-- by one key: `json` keeps their text and only checks it, where `jsonb`
-- parses and rebuilds every value: a 10,000-case run's case rows are stored
-- 200 ms sooner and take 150 bytes a case less (docs/PERFORMANCE.md,
-- `kw-server-bench --only scale`). Rewrites the cases table once.
ALTER TABLE cases
  ALTER COLUMN medians DROP DEFAULT,
  ALTER COLUMN bands DROP DEFAULT;
ALTER TABLE cases
  ALTER COLUMN params TYPE json USING params::json,
  ALTER COLUMN expected_launch TYPE json USING expected_launch::json,
  ALTER COLUMN correctness TYPE json USING correctness::json,
  ALTER COLUMN gpu_state TYPE json USING gpu_state::json,
  ALTER COLUMN medians TYPE json USING medians::json,
  ALTER COLUMN bands TYPE json USING bands::json,
  ALTER COLUMN fingerprint TYPE json USING fingerprint::json;
ALTER TABLE cases
  ALTER COLUMN medians SET DEFAULT '{}'::json,
  ALTER COLUMN bands SET DEFAULT '{}'::json;
