-- Raw samples apart from their summaries, partitioned by the month they were
-- stored in, so that retention drops whole months (DROP TABLE, no DELETE and
-- no vacuum after it). A measurement's summary stays in `measurements`
-- (median, flops, bytes, memory, replicate rule) and its case's in `cases`
-- (replicate location, spread, clocks, energy) for as long as the run is
-- kept; series, the overview and stored verdicts read only those.
CREATE TABLE samples (
  case_id            bigint NOT NULL,
  side               text NOT NULL,
  impl               text NOT NULL,
  stored_on          date NOT NULL,
  samples_ns         real[] NOT NULL,
  throttled_samples  integer[],  -- NULL: none (an empty array would take 16 bytes a row)
  replicates         smallint[],
  sm_mhz             real[],
  energy_j           double precision[],
  energy_replicates  integer[],
  power_w            double precision[],
  PRIMARY KEY (case_id, side, impl, stored_on)
) PARTITION BY RANGE (stored_on);

-- The month holding `day` as a partition, if missing. Every kw-server makes
-- this month's and the next at start and then hourly, so an ingest never
-- finds its month missing; the lock keeps two servers from racing on one.
CREATE FUNCTION kw_samples_month(day date) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  first date := date_trunc('month', day)::date;
BEGIN
  IF to_regclass(format('samples_%s', to_char(first, 'YYYY_MM'))) IS NOT NULL THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock(7743784955077291362);
  EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF samples FOR VALUES FROM (%L) TO (%L)',
                 'samples_' || to_char(first, 'YYYY_MM'), first, (first + interval '1 month')::date);
END $$;

SELECT kw_samples_month(month::date)
FROM generate_series(date_trunc('month', LEAST(COALESCE((SELECT min(created_at) FROM runs), now()), now())),
                     date_trunc('month', now() + interval '1 month'), interval '1 month') AS month;

INSERT INTO samples (case_id, side, impl, stored_on, samples_ns, throttled_samples, replicates, sm_mhz, energy_j,
                     energy_replicates, power_w)
SELECT m.case_id, m.side, m.impl, LEAST(r.created_at, now())::date, m.samples_ns, NULLIF(m.throttled_samples, '{}'),
       m.replicates, m.sm_mhz, m.energy_j, m.energy_replicates, m.power_w
FROM measurements m JOIN cases c ON c.id = m.case_id JOIN runs r ON r.id = c.run_id;

ALTER TABLE measurements
  DROP COLUMN samples_ns,
  DROP COLUMN throttled_samples,
  DROP COLUMN replicates,
  DROP COLUMN sm_mhz,
  DROP COLUMN energy_j,
  DROP COLUMN energy_replicates,
  DROP COLUMN power_w;
