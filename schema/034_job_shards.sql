-- A job split over several GPUs (docs/detection.md, "Sharding"): the job
-- keeps its place as the commit's measurement and gets the run; each of its
-- `shards` is a job of kind 'shard' in the queue, claimed, leased, requeued
-- and failed as any job, which measures its part of the cases and leaves
-- its report here until every shard's is in and they merge into the run.
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('measure', 'profile', 'shard'));
ALTER TABLE jobs ADD COLUMN shards integer NOT NULL DEFAULT 1 CHECK (shards BETWEEN 1 AND 64);
ALTER TABLE jobs ADD COLUMN parent_job_id bigint REFERENCES jobs (id);
ALTER TABLE jobs ADD COLUMN shard_index integer;  -- 1-based
ALTER TABLE jobs ADD COLUMN shard_report jsonb;
ALTER TABLE jobs ADD CONSTRAINT jobs_shard_of_parent
  CHECK ((kind = 'shard') = (parent_job_id IS NOT NULL AND shard_index IS NOT NULL));
CREATE UNIQUE INDEX jobs_shard_once ON jobs (parent_job_id, shard_index) WHERE kind = 'shard';
