-- Profiles: one case of a run under Nsight Compute, in the run's
-- commit and the commit it was compared with, on an agent of the run's GPU
-- model that has ncu. Queued on demand, and for a regression its worst case.
-- A profile's job measures nothing: it makes no run, and a commit's
-- measurement jobs (one per side, GPU class and rerun) do not count it.
ALTER TABLE jobs ADD COLUMN kind text NOT NULL DEFAULT 'measure' CHECK (kind IN ('measure', 'profile'));
ALTER TABLE jobs DROP CONSTRAINT jobs_one_per_measurement;
CREATE UNIQUE INDEX jobs_one_per_measurement
  ON jobs (project_id, commit_sha, gpu_class, on_default_branch, rerun) WHERE kind = 'measure';

-- Whether the agent's last claim said it can run ncu.
ALTER TABLE agents ADD COLUMN can_profile boolean NOT NULL DEFAULT false;

CREATE TABLE profiles (
  id            bigserial PRIMARY KEY,
  project_id    bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  run_id        bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  job_id        bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  case_name     text NOT NULL,
  head_commit   char(40) NOT NULL,
  base_commit   char(40),  -- NULL: the head alone
  reason        text NOT NULL CHECK (reason IN ('requested', 'worst_regression')),
  requested_by  text NOT NULL,
  launch_count  integer NOT NULL CHECK (launch_count BETWEEN 1 AND 1000),
  kernel_regex  text,
  -- kw profile's profile.json: {"case", "ncu", "launch_count", "base"?: {"commit", "kernels"}, "head": {...}}
  summary       jsonb,
  base_csv      text,
  head_csv      text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  completed_at  timestamptz
);
CREATE UNIQUE INDEX profiles_one_per_job ON profiles (job_id);
CREATE INDEX profiles_of_run ON profiles (run_id);
