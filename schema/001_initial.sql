-- kernelwatch schema, version 1: projects, tokens, agents, the job queue, and
-- the run history (runs -> stages, cases -> launches, measurements).

CREATE TABLE projects (
  id              bigserial PRIMARY KEY,
  name            text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9._-]+$'),
  default_branch  text NOT NULL DEFAULT 'main',
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
  id            bigserial PRIMARY KEY,
  name          text NOT NULL,
  scope         text NOT NULL CHECK (scope IN ('agent', 'ci', 'read', 'admin')),
  token_sha256  text NOT NULL UNIQUE,        -- hex SHA-256 of the token; the token itself is never stored
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz
);

CREATE TABLE agents (
  id            bigserial PRIMARY KEY,
  name          text NOT NULL UNIQUE,
  token_id      bigint NOT NULL REFERENCES api_tokens (id),
  host          text NOT NULL DEFAULT '',
  version       text NOT NULL DEFAULT '',
  gpus          jsonb NOT NULL DEFAULT '[]',
  registered_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE jobs (
  id               bigserial PRIMARY KEY,
  project_id       bigint NOT NULL REFERENCES projects (id),
  commit_sha       char(40) NOT NULL,
  branch           text NOT NULL,
  base_commit      char(40),
  pr               integer,
  gpu_class        text NOT NULL DEFAULT 'any',   -- 'any' or a GPU model name an agent advertises
  state            text NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'running', 'done', 'failed')),
  attempts         integer NOT NULL DEFAULT 0,
  max_attempts     integer NOT NULL DEFAULT 3,
  agent_id         bigint REFERENCES agents (id),
  lease_expires_at timestamptz,
  error            text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, commit_sha, gpu_class)
);
CREATE INDEX jobs_queue ON jobs (id) WHERE state = 'queued';
CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE state = 'running';

CREATE TABLE runs (
  id             bigserial PRIMARY KEY,
  project_id     bigint NOT NULL REFERENCES projects (id),
  job_id         bigint REFERENCES jobs (id),
  commit_sha     char(40) NOT NULL,
  branch         text NOT NULL,
  base_commit    char(40),
  agent_name     text NOT NULL,
  agent_version  text NOT NULL,
  agent_host     text NOT NULL DEFAULT '',
  gpu_model      text NOT NULL,              -- device.name, or 'none' for a host without a GPU
  device         jsonb,
  started_at     timestamptz NOT NULL,
  finished_at    timestamptz NOT NULL,
  gpu_seconds    double precision NOT NULL,
  report_sha256  text NOT NULL,              -- of the canonical report: the same report is stored once
  verdict        text NOT NULL DEFAULT 'pending',
  created_at     timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, report_sha256)
);
CREATE INDEX runs_history ON runs (project_id, gpu_model, branch, id);
CREATE INDEX runs_commit ON runs (project_id, commit_sha);
CREATE UNIQUE INDEX runs_one_per_job ON runs (job_id) WHERE job_id IS NOT NULL;

CREATE TABLE stages (
  run_id       bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  ordinal      smallint NOT NULL,
  name         text NOT NULL,
  status       text NOT NULL CHECK (status IN ('passed', 'failed', 'skipped')),
  duration_ms  bigint NOT NULL,
  message      text NOT NULL,
  log_tail     text NOT NULL,
  details      jsonb NOT NULL,
  PRIMARY KEY (run_id, ordinal)
);

CREATE TABLE cases (
  id               bigserial PRIMARY KEY,
  run_id           bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  project_id       bigint NOT NULL,             -- the run's project, copied for the history index
  ordinal          integer NOT NULL,
  name             text NOT NULL,
  params           jsonb NOT NULL,
  expected_launch  jsonb,
  correctness      jsonb,
  gpu_state        jsonb,
  medians          jsonb NOT NULL DEFAULT '{}',  -- impl -> median_ns, copied from measurements for history queries
  UNIQUE (run_id, ordinal),
  UNIQUE (run_id, name)
);
CREATE INDEX cases_by_name ON cases (project_id, name, run_id);

-- launches and measurements carry no foreign key: they are only ever written
-- in the transaction that writes their case, and a per-row key check would
-- be most of a large run's ingest time.
CREATE TABLE launches (
  case_id       bigint NOT NULL,
  ordinal       integer NOT NULL,
  kernel        text NOT NULL,
  grid          integer[] NOT NULL,
  block         integer[] NOT NULL,
  registers     integer NOT NULL,
  static_smem   bigint NOT NULL,
  dynamic_smem  bigint NOT NULL,
  duration_ns   double precision,
  PRIMARY KEY (case_id, ordinal)
);

CREATE TABLE measurements (
  case_id            bigint NOT NULL,
  impl               text NOT NULL,
  samples_ns         double precision[] NOT NULL,   -- raw, in the order taken
  median_ns          double precision NOT NULL,
  flops              double precision,
  bytes              double precision,
  peak_mem_bytes     bigint,
  throttled_samples  integer[] NOT NULL DEFAULT '{}',
  PRIMARY KEY (case_id, impl)
);
