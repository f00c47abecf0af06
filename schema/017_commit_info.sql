-- What git says of each run's commit, from the report's `git`: the tree ties
-- together commits with the same content (a fast-forward, a rebase, a merge
-- commit that adds nothing), the parents tie a merge commit to the pull
-- request it merges, author and subject label the dashboard's commit axis.
-- An acknowledgement carried to a run from another names that run.
ALTER TABLE runs
  ADD COLUMN tree_sha text CHECK (tree_sha ~ '^[0-9a-f]{40}$'),
  ADD COLUMN parent_shas text[] NOT NULL DEFAULT '{}',
  ADD COLUMN commit_author text,
  ADD COLUMN commit_subject text,
  ADD COLUMN committed_at timestamptz,
  ADD COLUMN acknowledged_from bigint REFERENCES runs (id) ON DELETE SET NULL;
CREATE INDEX runs_by_tree ON runs (project_id, tree_sha) WHERE tree_sha IS NOT NULL;
-- Where a comparison's threshold came from: the project's setting, or the
-- kernelwatch.json of the commit (or of a pull request's base) that set it.
ALTER TABLE comparisons ADD COLUMN threshold_source text;
