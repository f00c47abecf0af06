-- Replicates (docs/detection.md): the replicate each sample came from,
-- base_commit's build measured in the same job (a pull request's A/B), the
-- confirmation pass of a re-measured case, each run's between-replicate
-- spread (what the noise prior is learned from), and the test behind each
-- comparison. Older rows keep NULL: their samples are one replicate.
ALTER TABLE measurements ADD COLUMN replicates integer[];
ALTER TABLE measurements ADD COLUMN side text NOT NULL DEFAULT 'head' CHECK (side IN ('head', 'base'));
ALTER TABLE measurements DROP CONSTRAINT measurements_pkey;
ALTER TABLE measurements ADD PRIMARY KEY (case_id, side, impl);

ALTER TABLE cases
  ADD COLUMN first_pass_replicates integer,
  ADD COLUMN candidate_replicates integer,
  ADD COLUMN candidate_replicate_sd double precision;  -- sd of log(replicate location), NULL below 2

ALTER TABLE run_locations
  ADD COLUMN replicate_counts integer[],
  ADD COLUMN replicate_sds double precision[];

ALTER TABLE comparisons
  ADD COLUMN method text,               -- ab | history | baseline-run; NULL for older rows
  ADD COLUMN se double precision,       -- of log(ratio)
  ADD COLUMN df double precision,
  ADD COLUMN first_pass jsonb;          -- the first pass's test of a re-measured case

-- The run's decision: the false-alarm rate, comparisons counted, the noise
-- prior used, and the machine-drift signal of the baseline implementations.
ALTER TABLE runs ADD COLUMN detection jsonb;

-- The project's sensitivity is now the run's false-alarm rate (Holm over its
-- comparisons), not a forecast-error multiple.
ALTER TABLE projects ADD COLUMN run_alpha double precision NOT NULL DEFAULT 0.01
  CHECK (run_alpha > 0 AND run_alpha <= 0.2);
ALTER TABLE projects DROP COLUMN history_z;
