-- Regression detection's sensitivity per project: how many robust forecast
-- errors above a case's forecast level its candidate must be to be flagged.
-- Lower catches smaller changes and raises more false alarms; the trade-off
-- is measured by kw-detector-bench (docs/PERFORMANCE.md).
ALTER TABLE projects
  ADD COLUMN history_z double precision NOT NULL DEFAULT 3.5
  CHECK (history_z >= 1 AND history_z <= 20);
