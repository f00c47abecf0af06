-- Multi-GPU hosts: each worker of `kw agent` is an agent pinned to
-- one GPU, and says which (`gpu`: uuid, index, model) and how its last health
-- check went (`health`: healthy, checks[], checked_at) with every claim. A
-- worker whose GPU is unhealthy is refused jobs; the agents page shows why.
ALTER TABLE agents
  ADD COLUMN gpu jsonb,
  ADD COLUMN health jsonb;
