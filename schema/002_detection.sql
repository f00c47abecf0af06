-- Regression detection: thresholds per project and per case, the comparisons
-- of each run against its baseline, and acknowledged regressions.

ALTER TABLE projects
  ADD COLUMN min_threshold double precision NOT NULL DEFAULT 0.01
  CHECK (min_threshold > 0 AND min_threshold < 1);

CREATE TABLE case_settings (
  project_id     bigint NOT NULL REFERENCES projects (id),
  case_name      text NOT NULL,
  min_threshold  double precision NOT NULL CHECK (min_threshold > 0 AND min_threshold < 1),
  PRIMARY KEY (project_id, case_name)
);

-- The candidate's 25%-trimmed mean: the per-run location whose history sets
-- the noise-aware threshold (steadier than the median for bimodal timings).
ALTER TABLE cases ADD COLUMN candidate_location_ns double precision;

-- No foreign keys: written only with their run, in its transaction (see
-- measurements in 001).
CREATE TABLE comparisons (
  run_id              bigint NOT NULL,
  case_name           text NOT NULL,
  kind                text NOT NULL CHECK (kind IN ('time', 'speedup')),
  impl                text NOT NULL,   -- time: the implementation timed; speedup: the baseline implementation
  baseline_run_id     bigint,
  baseline_reason     text NOT NULL,
  status              text NOT NULL CHECK (status IN ('regression', 'improvement', 'unchanged', 'no-baseline')),
  ratio               double precision,
  ratio_of_medians    double precision,
  lower               double precision,
  upper               double precision,
  confidence          double precision,
  p_value             double precision,
  threshold           double precision,
  head_noise          double precision,
  base_noise          double precision,
  head_samples        integer,
  base_samples        integer,
  excluded_throttled  integer NOT NULL DEFAULT 0,
  note                text NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, case_name, kind, impl)
);
CREATE INDEX comparisons_baseline ON comparisons (baseline_run_id);

ALTER TABLE runs
  ADD COLUMN acknowledged_by text,
  ADD COLUMN acknowledged_reason text,
  ADD COLUMN acknowledged_at timestamptz,
  ADD CONSTRAINT runs_verdict_known CHECK (verdict IN ('pending', 'pass', 'improvement', 'regression', 'failed'));
