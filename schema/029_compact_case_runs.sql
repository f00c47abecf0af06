-- Smaller rows in the two tables that grow with every case of every run.

-- A measurement's replicate tags where they are the usual blocks (replicate
-- 0's samples, then replicate 1's, ...) as the blocks' sizes: 6 numbers for
-- 6 replicates of 10 samples, not 60. `replicates` keeps tags in any other
-- order; rows stored before keep theirs.
ALTER TABLE samples ADD COLUMN replicate_sizes smallint[];

-- The tags the sizes stand for; NULL for NULL.
CREATE FUNCTION kw_replicate_tags(sizes smallint[]) RETURNS smallint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT array_agg((t.i - 1)::smallint ORDER BY t.i, g.n)
  FROM unnest(sizes) WITH ORDINALITY AS t(size, i), generate_series(1, t.size) AS g(n)
$$;

-- What most of a run's comparisons were compared with and judged by (every
-- one, but for cases new to the run), kept once with the run: a comparison
-- keeps its own only where it differs. Rows stored before keep theirs.
ALTER TABLE runs ADD COLUMN comparison_baseline_reason text, ADD COLUMN comparison_threshold_source text;
ALTER TABLE comparisons ALTER COLUMN baseline_reason DROP NOT NULL;

-- Every run moves its cases' heads: with room left on each page the update
-- stays on it (HOT, no index entry) and the old row is pruned there, so the
-- table keeps one row per case instead of growing by one per case-run until
-- vacuum. It holds a row per case, so the room costs little.
ALTER TABLE case_heads SET (fillfactor = 50);
