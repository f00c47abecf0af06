-- Every case's candidate location (25%-trimmed mean) of a run in one row, in
-- case order: detection reads the newest 30 runs' locations on every ingest,
-- and 30 narrow rows are far cheaper to read than the 30 x (cases per run)
-- wide rows of cases. Written with its run, in its transaction.
CREATE TABLE run_locations (
  run_id      bigint PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
  case_names  text[] NOT NULL,
  locations   double precision[] NOT NULL
);

INSERT INTO run_locations (run_id, case_names, locations)
SELECT run_id, array_agg(name ORDER BY ordinal), array_agg(candidate_location_ns ORDER BY ordinal)
FROM cases
WHERE candidate_location_ns IS NOT NULL
GROUP BY run_id;
