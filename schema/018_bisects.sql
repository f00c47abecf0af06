-- Bisects: a default-branch regression whose push held several commits is
-- searched commit by commit. `commits` is the push's range: the last
-- measured commit before it (good) and the pushed commits oldest first, the
-- last the regression's (bad). Each step is a job measuring a midpoint A/B
-- against the newest known good commit, judged on the cases the regression
-- flagged; a commit that does not build is skipped, as `git bisect skip` does.
ALTER TABLE jobs ADD COLUMN range_commits text[] NOT NULL DEFAULT '{}';
CREATE TABLE bisects (
  id          bigserial PRIMARY KEY,
  project_id  bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  run_id      bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  gpu_class   text NOT NULL,
  commits     text[] NOT NULL,
  cases       text[] NOT NULL,
  good        integer NOT NULL,  -- index into commits (from 0) of the newest commit known good
  bad         integer NOT NULL,  -- of the oldest known bad
  skipped     integer[] NOT NULL DEFAULT '{}',
  steps       integer NOT NULL DEFAULT 0,
  max_steps   integer NOT NULL,
  state       text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'found', 'failed', 'cancelled')),
  first_bad   text,
  message     text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX bisects_one_per_run ON bisects (run_id);
ALTER TABLE jobs ADD COLUMN bisect_id bigint REFERENCES bisects (id) ON DELETE SET NULL;
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled'));
