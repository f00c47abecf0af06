-- Detection rule 2 (docs/detection.md, "Rule versions") changes only how an
-- A/B comparison is computed: outliers judged against both sides of the
-- job, and the noise prior set aside where the job's own spread contradicts
-- it. A run's locations and its history comparisons are computed as
-- before, so a run with no A/B comparison is valid under rule 2; a run
-- judged A/B keeps version 1, the rule its comparisons were computed with.
UPDATE runs SET rule_version = 2
WHERE rule_version = 1
  AND NOT EXISTS (SELECT 1 FROM comparisons c WHERE c.run_id = runs.id AND c.method = 'ab');
