-- Each run's SM clock per case (common::RunClock: the geometric mean of its
-- replicates' clocks, and the within-run sums the slope of time on clock is
-- pooled from): a main run is judged against its history at equal clock
-- (docs/detection.md). NULL where the run reported no clocks; a history
-- uses clocks once min_history of its runs have them.
ALTER TABLE run_locations
  ADD COLUMN clock_mhz double precision[],
  ADD COLUMN clock_sxx double precision[],
  ADD COLUMN clock_sxy double precision[];

ALTER TABLE cases
  ADD COLUMN candidate_clock_mhz double precision,
  ADD COLUMN candidate_clock_sxx double precision,
  ADD COLUMN candidate_clock_sxy double precision;
