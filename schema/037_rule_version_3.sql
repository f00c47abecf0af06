-- Detection rule 3 (docs/detection.md, "Rule versions") changes only which
-- replicates an A/B comparison leaves out: an outlier of the job as
-- measured that is not one with the head moved back by its shift is kept.
-- A run's locations and its history comparisons are computed as before, so
-- a run with no A/B comparison is valid under rule 3; a run judged A/B keeps
-- the version its comparisons were computed with.
UPDATE runs SET rule_version = 3
WHERE rule_version = 2
  AND NOT EXISTS (SELECT 1 FROM comparisons c WHERE c.run_id = runs.id AND c.method = 'ab');
