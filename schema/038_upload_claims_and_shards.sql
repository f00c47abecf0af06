-- An upload whose report was a shard's is done once its job took it
-- (shard_job_id): it no longer counts as open in the token's and project's
-- quotas, and a resend is answered as the shard's first sending was. Its
-- parts stay until it expires, for that answer.
ALTER TABLE uploads ADD COLUMN shard_job_id bigint;
DROP INDEX uploads_open_by_token;
CREATE INDEX uploads_open_by_token ON uploads (token_id) WHERE run_id IS NULL AND shard_job_id IS NULL;

-- The token that queued a job, so that one token's queued shards are
-- capped; and the reaper's look for sharded jobs whose shards are all done
-- goes through the running sharded jobs alone, each one's shards through
-- jobs_shard_once, not the whole table once a job.
ALTER TABLE jobs ADD COLUMN token_id bigint REFERENCES api_tokens (id) ON DELETE SET NULL;
CREATE INDEX jobs_sharded_running ON jobs (id) WHERE shards > 1 AND kind = 'measure' AND state = 'running';
CREATE INDEX jobs_queued_shards ON jobs (parent_job_id) WHERE kind = 'shard' AND state = 'queued';
