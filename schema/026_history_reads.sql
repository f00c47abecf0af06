-- The newest run of each case per project, branch and GPU model, moved
-- forward by each stored run: the overview reads one row a case here instead
-- of every run's cases (1.5 s for a project of 1,000 runs of 1,000 cases).
-- Runs are never deleted, so a head always names a stored run.
CREATE TABLE case_heads (
  project_id  bigint NOT NULL,
  branch      text NOT NULL,
  name        text NOT NULL,
  gpu_model   text NOT NULL,
  run_id      bigint NOT NULL,
  PRIMARY KEY (project_id, branch, name, gpu_model)
);

INSERT INTO case_heads (project_id, branch, name, gpu_model, run_id)
SELECT DISTINCT ON (c.project_id, r.branch, c.name, r.gpu_model) c.project_id, r.branch, c.name, r.gpu_model,
       c.run_id
FROM cases c JOIN runs r ON r.id = c.run_id
ORDER BY c.project_id, r.branch, c.name, r.gpu_model, c.run_id DESC;

-- The runs list names each run's flagged cases: found among a run's few
-- regressions, not by reading every comparison of its thousands of cases.
CREATE INDEX comparisons_flagged ON comparisons (run_id) WHERE status = 'regression';

-- What the series and runs list read for every run, kept where they read it:
-- the candidate's energy per iteration (the geometric mean of its
-- replicates) and board power (their median), and a run's case count.
ALTER TABLE cases
  ADD COLUMN candidate_energy_j double precision,
  ADD COLUMN candidate_power_w double precision;
UPDATE cases c SET candidate_energy_j = e.energy_j, candidate_power_w = e.power_w
FROM (SELECT m.case_id,
             (SELECT exp(avg(ln(x))) FROM unnest(m.energy_j) AS x WHERE x > 0) AS energy_j,
             (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY w) FROM unnest(m.power_w) AS w) AS power_w
      FROM measurements m
      WHERE m.side = 'head' AND m.impl = 'candidate' AND m.energy_j IS NOT NULL) AS e
WHERE e.case_id = c.id;

ALTER TABLE runs ADD COLUMN case_count integer NOT NULL DEFAULT 0;
UPDATE runs r SET case_count = (SELECT count(*) FROM cases c WHERE c.run_id = r.id);
