-- What each comparison's test could see: the smallest slowdown it flags in
-- nine jobs of ten at the run's alpha among the run's comparisons, with the
-- noise and replicates this run had (kw::common::detectable_change),
-- computed as the run is judged. Runs judged before have none.
ALTER TABLE comparisons ADD COLUMN detectable double precision;
