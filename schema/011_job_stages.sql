-- Stage results an agent streams while it runs a job (POST
-- /api/v1/jobs/{id}/stages), before its report: `kw submit --wait` and the
-- job page show each stage as it starts and ends, a failed preflight stage
-- the moment it fails. Kept per attempt: a retried job starts a fresh list.
-- The run report stays the record; these rows are its progress.
CREATE TABLE job_stages (
  job_id       bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  attempt      integer NOT NULL,
  name         text NOT NULL,
  ordinal      integer NOT NULL,
  status       text NOT NULL CHECK (status IN ('started', 'passed', 'failed', 'skipped')),
  duration_ms  bigint,
  gpu_seconds  double precision,
  message      text NOT NULL DEFAULT '',
  log_tail     text NOT NULL DEFAULT '',
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, attempt, name)
);
