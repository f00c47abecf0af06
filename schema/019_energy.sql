-- Energy per iteration (run report measurements[].energy_j): one
-- value per replicate that measured it, its replicate index and the average
-- board power; NULL where the bench measured no energy (never zero).
ALTER TABLE measurements
  ADD COLUMN energy_j double precision[],
  ADD COLUMN energy_replicates integer[],
  ADD COLUMN power_w double precision[];

-- Energy is judged as a second metric: a comparison of kind 'energy' beside
-- the candidate's 'time' one, in the same run decision, by its own threshold.
ALTER TABLE comparisons DROP CONSTRAINT comparisons_kind_check;
ALTER TABLE comparisons ADD CONSTRAINT comparisons_kind_check CHECK (kind IN ('time', 'speedup', 'energy'));
ALTER TABLE projects ADD COLUMN energy_threshold double precision NOT NULL DEFAULT 0.05
  CHECK (energy_threshold > 0 AND energy_threshold < 1);
