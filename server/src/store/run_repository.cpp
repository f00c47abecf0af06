#include "store/run_repository.hpp"

#include <cmath>
#include <tuple>
#include <unordered_map>

#include "errors.hpp"
#include "kw/common/detection.hpp"
#include "kw/common/sha256.hpp"
#include "kw/common/stats.hpp"
#include "store/pg_array.hpp"
#include "store/replicate_blocks.hpp"

namespace kw::server {

namespace {

constexpr const char* kInsertRun = R"sql(
INSERT INTO runs (project_id, job_id, commit_sha, branch, base_commit, agent_name, agent_version, agent_host,
                  gpu_model, device, started_at, finished_at, gpu_seconds, report_sha256, tree_sha, parent_shas,
                  commit_author, commit_subject, committed_at, rule_version)
SELECT $1, $2::bigint, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11::timestamptz, $12::timestamptz, $13, $14,
       g->>'tree', ARRAY(SELECT jsonb_array_elements_text(COALESCE(g->'parents', '[]'))), g->>'author',
       g->>'subject', (g->>'committed_at')::timestamptz, $16
FROM (SELECT $15::jsonb AS g) AS git
ON CONFLICT (project_id, report_sha256) DO NOTHING
RETURNING id
)sql";

constexpr const char* kInsertStages = R"sql(
INSERT INTO stages (run_id, ordinal, name, status, duration_ms, gpu_seconds, message, log_tail, details)
SELECT $1, s.ordinal - 1, s.value->>'name', s.value->>'status', (s.value->>'duration_ms')::bigint,
       (s.value->>'gpu_seconds')::float8, s.value->>'message', s.value->>'log_tail', s.value->'details'
FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY AS s(value, ordinal)
)sql";

// Launches, measurements and samples of cases whose ids are taken ($2, in
// case order) before the cases are written: a case row is written once,
// with its status, when its run has been judged (kInsertCaseRows). Every
// column is an array in binary form (store/pg_array.hpp), a row per
// element, rows tied to their case by its ordinal; the samples of all
// measurements in one real[] ($20) that each row slices (first..last), and
// their clocks, where measured, in another ($21) of the same layout. One
// round trip however many cases and samples the run has.
constexpr const char* kInsertCases = R"sql(
WITH counted AS (UPDATE runs SET case_count = cardinality($2::bigint[]) WHERE id = $1),
new_launches AS (
  INSERT INTO launches (case_id, ordinal, kernel, grid, block, registers, static_smem, dynamic_smem, duration_ns)
  SELECT ($2::bigint[])[l.case_ordinal + 1], l.ordinal, l.kernel,
         ($25::bigint[])[6 * l.i - 5:6 * l.i - 3]::integer[], ($25::bigint[])[6 * l.i - 2:6 * l.i]::integer[],
         l.registers::integer, l.static_smem, l.dynamic_smem, l.duration_ns
  FROM unnest($22::integer[], $23::integer[], $24::text[], $26::bigint[], $27::bigint[], $28::bigint[],
              $29::float8[])
    WITH ORDINALITY AS l(case_ordinal, ordinal, kernel, registers, static_smem, dynamic_smem, duration_ns, i)
),
new_locations AS (
  INSERT INTO run_locations (run_id, case_names, locations, replicate_counts, replicate_sds, clock_mhz, clock_sxx,
                             clock_sxy)
  SELECT $1, $30::text[], $31::float8[], $32::integer[], $33::float8[], $34::float8[], $35::float8[],
         $36::float8[]
),
new_measurements AS (
  SELECT ($2::bigint[])[t.ordinal + 1] AS case_id, t.*
  FROM unnest($3::integer[], $4::text[], $5::text[], $6::integer[], $7::integer[], $8::boolean[], $9::float8[],
              $10::float8[], $11::float8[], $12::bigint[], $13::text[], $14::text[], $15::text[], $16::text[],
              $17::text[], $18::text[], $19::text[])
    AS t(ordinal, side, impl, first, last, clocked, median, flops, bytes, peak, throttled, replicates,
         replicate_sizes, energy_j, energy_replicates, power_w, replicate_location)
),
summaries AS (
  INSERT INTO measurements (case_id, side, impl, median_ns, flops, bytes, peak_mem_bytes, replicate_location)
  SELECT case_id, side, impl, median, flops, bytes, peak, replicate_location FROM new_measurements
)
INSERT INTO samples (case_id, side, impl, stored_on, samples_ns, throttled_samples, replicates, replicate_sizes,
                     sm_mhz, energy_j, energy_replicates, power_w)
SELECT case_id, side, impl, current_date, ($20::real[])[first:last], throttled::integer[],
       replicates::smallint[], replicate_sizes::smallint[], CASE WHEN clocked THEN ($21::real[])[first:last] END,
       energy_j::float8[], energy_replicates::integer[], power_w::float8[]
FROM new_measurements
)sql";

// The cases of a judged run, a column each ($3..$19 and $21..$24, binary
// arrays in case order, with the ids kInsertCases used), and their status
// ($20: their candidate's time comparison, no-baseline where there is none).
constexpr const char* kInsertCaseRows = R"sql(
INSERT INTO cases (id, run_id, project_id, ordinal, name, params, expected_launch, correctness, gpu_state, medians,
                   bands, candidate_location_ns, first_pass_replicates, candidate_replicates, candidate_replicate_sd,
                   candidate_clock_mhz, candidate_clock_sxx, candidate_clock_sxy, candidate_energy_j,
                   candidate_power_w, status, fingerprint, identical_to_base, audit, changed_from_base)
SELECT c.id, $1, $2, c.i - 1, c.name, c.params, c.expected_launch, c.correctness, c.gpu_state, c.medians, c.bands,
       c.location, c.first_pass_replicates, c.replicates, c.replicate_sd, c.clock_mhz, c.clock_sxx, c.clock_sxy,
       c.energy_j, c.power_w, c.status, c.fingerprint, c.identical_to_base, c.audit, c.changed_from_base
FROM unnest($3::bigint[], $4::text[], $5::json[], $6::json[], $7::json[], $8::json[], $9::json[],
            $10::json[], $11::float8[], $12::integer[], $13::integer[], $14::float8[], $15::float8[],
            $16::float8[], $17::float8[], $18::float8[], $19::float8[], $20::text[], $21::json[],
            $22::boolean[], $23::boolean[], $24::json[])
  WITH ORDINALITY AS c(id, name, params, expected_launch, correctness, gpu_state, medians, bands, location,
                       first_pass_replicates, replicates, replicate_sd, clock_mhz, clock_sxx, clock_sxy, energy_j,
                       power_w, status, fingerprint, identical_to_base, audit, changed_from_base, i)
)sql";

// The run's cases become the newest of their branch and GPU model, unless a
// later run's already are. In name order, so two runs of the same cases
// stored at once take the rows' locks in one order.
constexpr const char* kAdvanceCaseHeads = R"sql(
INSERT INTO case_heads (project_id, branch, name, gpu_model, run_id)
SELECT r.project_id, r.branch, c.name, r.gpu_model, r.id
FROM runs r JOIN cases c ON c.run_id = r.id
WHERE r.id = $1
ORDER BY c.name
ON CONFLICT (project_id, branch, name, gpu_model) DO UPDATE SET run_id = EXCLUDED.run_id
  WHERE case_heads.run_id < EXCLUDED.run_id
)sql";

// A run without its cases and comparisons, with the paging of `per_page`
// ($3) cases from ordinal $2.
constexpr const char* kRunHead = R"sql(
SELECT json_build_object(
  'id', r.id, 'project', p.name, 'job_id', r.job_id, 'commit', r.commit_sha, 'branch', r.branch,
  'base_commit', r.base_commit,
  'agent', json_build_object('name', r.agent_name, 'version', r.agent_version, 'host', r.agent_host),
  'gpu_model', r.gpu_model, 'device', r.device, 'started_at', r.started_at, 'finished_at', r.finished_at,
  'gpu_seconds', r.gpu_seconds, 'verdict', r.verdict, 'created_at', r.created_at, 'detection', r.detection,
  'rule_version', r.rule_version,
  'git', CASE WHEN r.tree_sha IS NULL THEN NULL ELSE json_build_object(
      'tree', r.tree_sha, 'parents', r.parent_shas, 'author', r.commit_author, 'subject', r.commit_subject,
      'committed_at', r.committed_at) END,
  'acknowledgement', CASE WHEN r.acknowledged_at IS NULL THEN NULL ELSE json_build_object(
      'by', r.acknowledged_by, 'reason', r.acknowledged_reason, 'at', r.acknowledged_at,
      'carried_from', (SELECT json_build_object('run_id', a.id, 'commit', a.commit_sha, 'branch', a.branch,
                                                'same_tree', a.tree_sha = r.tree_sha)
                       FROM runs a WHERE a.id = r.acknowledged_from)) END,
  'stages', (SELECT COALESCE(json_agg(json_build_object(
                 'name', s.name, 'status', s.status, 'duration_ms', s.duration_ms,
                 'gpu_seconds', s.gpu_seconds, 'message', s.message,
                 'log_tail', s.log_tail, 'details', s.details) ORDER BY s.ordinal), '[]')
             FROM stages s WHERE s.run_id = r.id),
  'flagged', (SELECT COALESCE(json_agg(json_build_object(
                 'case', x.case_name, 'status', x.status, 'ratio', x.ratio, 'lower', x.lower, 'upper', x.upper,
                 'p_value', x.p_value, 'threshold', x.threshold, 'head_noise', x.head_noise,
                 'base_noise', x.base_noise, 'ratio_of_medians', x.ratio_of_medians, 'detectable', x.detectable,
                 'baseline_reason', COALESCE(x.baseline_reason, r.comparison_baseline_reason),
                 'baseline_run_id', x.baseline_run_id, 'changed', c.changed_from_base -> 'differs',
                 'head_ns', (SELECT m.median_ns FROM measurements m
                             WHERE m.case_id = c.id AND m.side = 'head' AND m.impl = 'candidate'),
                 'base_ns', (SELECT m.median_ns FROM measurements m
                             WHERE m.case_id = c.id AND m.side = 'base' AND m.impl = 'candidate'),
                 'head_baselines', (SELECT json_object_agg(m.impl, m.median_ns) FROM measurements m
                                    WHERE m.case_id = c.id AND m.side = 'head' AND m.impl <> 'candidate'),
                 'base_baselines', (SELECT json_object_agg(m.impl, m.median_ns) FROM measurements m
                                    WHERE m.case_id = c.id AND m.side = 'base' AND m.impl <> 'candidate'))
                 ORDER BY x.status = 'regression' DESC, x.ratio DESC), '[]')
              FROM comparisons x JOIN cases c ON c.run_id = x.run_id AND c.name = x.case_name
              WHERE x.run_id = r.id AND x.impl = 'candidate' AND x.kind = 'time'
                AND x.status IN ('regression', 'improvement')),
  'inconclusive', (SELECT count(*) FROM comparisons x
                   WHERE x.run_id = r.id AND x.impl = 'candidate' AND x.kind = 'time'
                     AND x.status = 'inconclusive'),
  'undetectable', (SELECT count(*) FROM comparisons x
                   WHERE x.run_id = r.id AND x.impl = 'candidate' AND x.kind = 'time'
                     AND x.detectable > x.threshold),
  'fingerprints', (SELECT json_build_object(
                       'identical_to_base', count(*) FILTER (WHERE c.identical_to_base),
                       'audited', count(*) FILTER (WHERE c.audit),
                       'audit_misses', count(*) FILTER (WHERE c.audit AND c.status IN ('regression', 'improvement')),
                       'timed', count(*) FILTER (WHERE NOT c.identical_to_base AND c.candidate_location_ns IS NOT NULL))
                   FROM cases c WHERE c.run_id = r.id),
  'bisect', (SELECT json_build_object('id', b.id, 'state', b.state, 'first_bad', b.first_bad, 'steps', b.steps,
                                      'commits', cardinality(b.commits) - 1, 'message', b.message)
             FROM bisects b WHERE b.run_id = r.id),
  'profiles', (SELECT COALESCE(json_agg(json_build_object('id', f.id, 'case', f.case_name, 'state', j.state,
                                                          'reason', f.reason) ORDER BY f.id DESC), '[]')
               FROM profiles f JOIN jobs j ON j.id = f.job_id WHERE f.run_id = r.id),
  'paging', json_build_object(
      'page', $2::bigint / $3::integer + 1, 'per_page', $3::integer, 'cases_total', n.total,
      'pages', GREATEST(1, (n.total + $3::integer - 1) / $3::integer))
)::text, n.total
FROM runs r JOIN projects p ON p.id = r.project_id,
     LATERAL (SELECT count(*)::integer AS total FROM cases WHERE run_id = r.id) AS n
WHERE r.id = $1
)sql";

// The comparisons of the cases with ordinals [$2, $3) whose names match $4
// ('' any), as a JSON array.
constexpr const char* kRunComparisons = R"sql(
SELECT COALESCE(json_agg(json_build_object(
                      'case', x.case_name, 'kind', x.kind, 'impl', x.impl, 'status', x.status,
                      'baseline_run_id', x.baseline_run_id,
                      'baseline_reason', COALESCE(x.baseline_reason, r.comparison_baseline_reason),
                      'ratio', x.ratio, 'ratio_of_medians', x.ratio_of_medians, 'lower', x.lower, 'upper', x.upper,
                      'confidence', x.confidence, 'p_value', x.p_value, 'threshold', x.threshold,
                      'threshold_source', COALESCE(x.threshold_source, r.comparison_threshold_source),
                      'head_noise', x.head_noise, 'base_noise', x.base_noise, 'head_samples', x.head_samples,
                      'base_samples', x.base_samples, 'excluded_throttled', x.excluded_throttled, 'note', x.note,
                      'method', x.method, 'se', x.se, 'df', x.df, 'first_pass', x.first_pass,
                      'detectable', x.detectable, 'changed', c.changed_from_base -> 'differs')
                    ORDER BY c.ordinal, x.kind DESC, x.impl <> 'candidate', x.impl), '[]')::text
FROM comparisons x JOIN cases c ON c.run_id = x.run_id AND c.name = x.case_name JOIN runs r ON r.id = x.run_id
WHERE x.run_id = $1 AND c.ordinal >= $2::bigint AND c.ordinal < $3::bigint AND ($4 = '' OR x.case_name ILIKE $4)
)sql";

// The cases with ordinals [$2, $3), with launches and measurements, as a JSON array.
constexpr const char* kRunCases = R"sql(
SELECT COALESCE(json_agg(json_build_object(
                 'name', c.name, 'params', c.params, 'expected_launch', c.expected_launch,
                 'correctness', c.correctness, 'gpu_state', c.gpu_state,
                 'launches', (SELECT COALESCE(json_agg(json_build_object(
                                  'kernel', l.kernel, 'grid', l.grid, 'block', l.block, 'registers', l.registers,
                                  'static_smem', l.static_smem, 'dynamic_smem', l.dynamic_smem,
                                  'duration_ns', l.duration_ns) ORDER BY l.ordinal), '[]')
                              FROM launches l WHERE l.case_id = c.id),
                 'first_pass_replicates', c.first_pass_replicates,
                 'fingerprint', c.fingerprint, 'identical_to_base', c.identical_to_base, 'audit', c.audit,
                 'changed_from_base', c.changed_from_base,
                 'measurements', (SELECT COALESCE(json_agg(json_build_object(
                                      'impl', m.impl, 'samples_ns', COALESCE(s.samples_ns, '{}'),
                                      'median_ns', m.median_ns, 'flops', m.flops, 'bytes', m.bytes,
                                      'peak_mem_bytes', m.peak_mem_bytes,
                                      'throttled_samples', COALESCE(s.throttled_samples, '{}'),
                                      'replicates', COALESCE(s.replicates, kw_replicate_tags(s.replicate_sizes)), 'sm_mhz', s.sm_mhz, 'energy_j', s.energy_j,
                                      'energy_replicates', s.energy_replicates, 'power_w', s.power_w,
                                      'samples_kept', s.case_id IS NOT NULL,
                                      'replicate_location', COALESCE(m.replicate_location, 'trimmed_mean'))
                                      ORDER BY m.impl <> 'candidate', m.impl), '[]')
                                  FROM measurements m
                                  LEFT JOIN samples s ON s.case_id = m.case_id AND s.side = m.side AND s.impl = m.impl
                                  WHERE m.case_id = c.id AND m.side = 'head'),
                 'base_measurements', (SELECT json_agg(json_build_object(
                                      'impl', m.impl, 'samples_ns', COALESCE(s.samples_ns, '{}'),
                                      'median_ns', m.median_ns,
                                      'throttled_samples', COALESCE(s.throttled_samples, '{}'),
                                      'replicates', COALESCE(s.replicates, kw_replicate_tags(s.replicate_sizes)), 'sm_mhz', s.sm_mhz, 'energy_j', s.energy_j,
                                      'energy_replicates', s.energy_replicates, 'power_w', s.power_w,
                                      'samples_kept', s.case_id IS NOT NULL,
                                      'replicate_location', COALESCE(m.replicate_location, 'trimmed_mean'))
                                      ORDER BY m.impl <> 'candidate', m.impl)
                                  FROM measurements m
                                  LEFT JOIN samples s ON s.case_id = m.case_id AND s.side = m.side AND s.impl = m.impl
                                  WHERE m.case_id = c.id AND m.side = 'base')
               ) ORDER BY c.ordinal), '[]')::text
FROM cases c WHERE c.run_id = $1 AND c.ordinal >= $2::bigint AND c.ordinal < $3::bigint
)sql";

}  // namespace

std::vector<Statement> RunRepository::statements() {
  return {{"run_insert", kInsertRun},
          {"run_insert_stages", kInsertStages},
          {"run_insert_cases", kInsertCases},
          {"run_insert_case_rows", kInsertCaseRows},
          {"run_advance_case_heads", kAdvanceCaseHeads},
          {"run_head", kRunHead},
          {"run_comparisons", kRunComparisons},
          {"run_cases", kRunCases}};
}

namespace {

// One row's array, as a literal in a text[] column; NULL when empty (older
// reports without it).
template <typename T>
void add_array_or_null(PgBinaryArray<PgType::text>& column, const std::vector<T>& values) {
  if (values.empty()) {
    column.null();
    return;
  }
  PgArray row;
  for (const T& value : values) row.number(value);
  column.add(row.str());
}

template <PgType Type, typename T>
void add_or_null(PgBinaryArray<Type>& column, const std::optional<T>& value) {
  value ? column.add(*value) : column.null();
}

}  // namespace

std::int64_t RunRepository::ensure_project(pqxx::work& tx, const std::string& name) {
  pqxx::result rows = tx.exec_params(
      "INSERT INTO projects (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING id", name);
  if (!rows.empty()) return rows[0][0].as<std::int64_t>();
  return tx.exec_params("SELECT id FROM projects WHERE name = $1", name)[0][0].as<std::int64_t>();
}

std::int64_t RunRepository::existing_project_id(pqxx::work& tx, const std::string& name) {
  auto id = find_project(tx, name);
  if (!id) {
    throw NotFound("no_such_project",
                   "no project \"" + name +
                       "\"; an admin creates it (POST /api/v1/projects, or kw-server project "
                       "create, or a token scoped to it)");
  }
  return *id;
}

std::optional<std::int64_t> RunRepository::create_project(pqxx::work& tx, const std::string& name,
                                                          const std::string& default_branch) {
  pqxx::result rows = tx.exec_params(
      "INSERT INTO projects (name, default_branch) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING "
      "id",
      name, default_branch);
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<std::int64_t>();
}

std::optional<std::string> RunRepository::project_of_run(pqxx::work& tx, std::int64_t run_id) {
  pqxx::result rows = tx.exec_params(
      "SELECT p.name FROM runs r JOIN projects p ON p.id = r.project_id WHERE r.id = $1", run_id);
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<std::string>();
}

std::string RunRepository::verdict_of(pqxx::work& tx, std::int64_t run_id) {
  return tx.exec_params1("SELECT verdict FROM runs WHERE id = $1", run_id)[0].as<std::string>();
}

std::vector<std::string> RunRepository::measured_commits_with_prefix(pqxx::work& tx, std::int64_t project_id,
                                                                     const std::string& prefix, int limit) {
  std::vector<std::string> commits;
  for (const auto& row :
       tx.exec_params("SELECT DISTINCT commit_sha FROM runs WHERE commit_sha LIKE $1 || '%' "
                      "AND ($2 = 0 OR project_id = $2) ORDER BY commit_sha LIMIT $3",
                      prefix, project_id, limit))
    commits.push_back(row[0].as<std::string>());
  return commits;
}

std::optional<std::string> RunRepository::newest_commit_on_branch(pqxx::work& tx, std::int64_t project_id,
                                                                  const std::string& branch) {
  pqxx::result rows = tx.exec_params(
      "SELECT commit_sha FROM runs WHERE branch = $1 AND ($2 = 0 OR project_id = $2) "
      "ORDER BY finished_at DESC, id DESC LIMIT 1",
      branch, project_id);
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<std::string>();
}

std::vector<std::int64_t> RunRepository::projects_with_commit(pqxx::work& tx, const std::string& commit) {
  std::vector<std::int64_t> projects;
  for (const auto& row : tx.exec_params("SELECT DISTINCT project_id FROM runs WHERE commit_sha = $1", commit))
    projects.push_back(row[0].as<std::int64_t>());
  return projects;
}

std::string RunRepository::project_name(pqxx::work& tx, std::int64_t project_id) {
  return tx.exec_params1("SELECT name FROM projects WHERE id = $1", project_id)[0].as<std::string>();
}

std::optional<std::int64_t> RunRepository::find_project(pqxx::work& tx, const std::string& name) {
  pqxx::result rows = tx.exec_params("SELECT id FROM projects WHERE name = $1", name);
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<std::int64_t>();
}

namespace {

// The measurements of a run as run_insert_cases takes them: one array per
// column, a row per measurement, every sample in one array that each row
// slices (first..last), and every clock in another, where one was measured.
struct MeasurementColumns {
  PgBinaryArray<PgType::int4> ordinals, firsts, lasts;
  PgBinaryArray<PgType::text> sides, impls, throttled, replicates, replicate_sizes, energy_j,
      energy_replicates, power_w, replicate_rules;
  PgBinaryArray<PgType::boolean> clocked;
  PgBinaryArray<PgType::float8> medians, flops, bytes;
  PgBinaryArray<PgType::int8> peaks;
  PgBinaryArray<PgType::float4> samples;
  std::vector<float> clocks;  // each sample's, 0 for a row without: the layout of `samples`
  std::size_t sample_count = 0;

  void add(std::size_t ordinal, const common::Measurement& m, const char* side) {
    ordinals.add(ordinal);
    impls.add(m.impl);
    sides.add(side);
    for (double sample : m.samples_ns) samples.add(sample);
    firsts.add(sample_count + 1);  // PostgreSQL arrays count from 1
    if (!m.sm_mhz.empty()) {       // one per sample (parse_run_report)
      clocks.resize(sample_count);
      clocks.insert(clocks.end(), m.sm_mhz.begin(), m.sm_mhz.end());
    }
    clocked.add(!m.sm_mhz.empty());
    sample_count += m.samples_ns.size();
    lasts.add(sample_count);
    medians.add(m.median_ns);
    add_or_null(flops, m.flops);
    add_or_null(bytes, m.bytes);
    add_or_null(peaks, m.peak_mem_bytes);
    add_array_or_null(throttled, m.throttled_samples);
    // Blocks in order, the usual shape, as their sizes (replicate_blocks.hpp).
    if (auto sizes = replicate_block_sizes(m.replicates); sizes && !sizes->empty()) {
      replicates.null();
      add_array_or_null(replicate_sizes, *sizes);
    } else {
      add_array_or_null(replicates, m.replicates);
      replicate_sizes.null();
    }
    add_array_or_null(energy_j, m.energy_j);
    add_array_or_null(energy_replicates, m.energy_replicates);
    add_array_or_null(power_w, m.power_w);
    // NULL: the trimmed mean, as in every row stored before the rule was.
    if (m.replicate_location == common::ReplicateLocation::trimmed_mean)
      replicate_rules.null();
    else
      replicate_rules.add(common::to_string(m.replicate_location));
  }

  pqxx::binarystring clock_param() const {
    PgBinaryArray<PgType::float4> all;
    if (!clocks.empty()) {
      for (float clock : clocks) all.add(clock);
      for (std::size_t i = clocks.size(); i < sample_count; ++i) all.add(0.0F);
    }
    return all.param();
  }
};

// Each launch of each case: its grid and block six numbers of one array.
struct LaunchColumns {
  PgBinaryArray<PgType::int4> case_ordinals, ordinals;
  PgBinaryArray<PgType::text> kernels;
  PgBinaryArray<PgType::int8> dims, registers, static_smem, dynamic_smem;
  PgBinaryArray<PgType::float8> durations;

  void add(std::size_t case_ordinal, std::size_t ordinal, const common::Launch& launch) {
    case_ordinals.add(case_ordinal);
    ordinals.add(ordinal);
    kernels.add(launch.kernel);
    for (std::int64_t dim : launch.grid) dims.add(dim);
    for (std::int64_t dim : launch.block) dims.add(dim);
    registers.add(launch.registers);
    static_smem.add(launch.static_smem);
    dynamic_smem.add(launch.dynamic_smem);
    add_or_null(durations, launch.duration_ns);
  }
};

}  // namespace

// The cases of a run as run_insert_case_rows takes them, but for their
// status, which comes from judging the run.
struct CaseRowColumns {
  std::vector<std::string> names;
  PgBinaryArray<PgType::int8> ids;
  PgBinaryArray<PgType::text> name_column;
  PgBinaryArray<PgType::json_text> params, expected_launch, correctness, gpu_state, medians, bands,
      fingerprint, changed_from_base;
  PgBinaryArray<PgType::float8> locations, replicate_sds, clock_mhz, clock_sxx, clock_sxy, energy_j, power_w;
  PgBinaryArray<PgType::int4> first_pass_replicates, replicates;
  PgBinaryArray<PgType::boolean> identical_to_base, audit;

  // `source`: the case as posted, whose objects are stored as they came.
  void add(const common::Case& c, const nlohmann::json& source) {
    names.push_back(c.name);
    name_column.add(c.name);
    auto as_posted = [&](PgBinaryArray<PgType::json_text>& column, const char* key) {
      auto it = source.find(key);
      it != source.end() ? column.add(it->dump()) : column.null();
    };
    auto params_it = source.find("params");
    params.add(params_it != source.end() ? params_it->dump() : std::string("{}"));
    as_posted(expected_launch, "expected_launch");
    as_posted(correctness, "correctness");
    as_posted(gpu_state, "gpu_state");
    as_posted(fingerprint, "fingerprint");
    as_posted(changed_from_base, "changed_from_base");
    add_or_null(first_pass_replicates, c.first_pass_replicates);
    identical_to_base.add(c.identical_to_base);
    audit.add(c.audit);
  }
};

namespace {

// Each case's candidate location, replicate spread and clock, as the rule
// computed them (common::summarize_case): what its history and the GPU
// model's noise prior are made of, and what a later run is judged against
// at equal clock; in the case's row and in the run's run_locations row.
struct LocationColumns {
  PgBinaryArray<PgType::text> names;
  PgBinaryArray<PgType::float8> locations, replicate_sds, clocks, clock_sxx, clock_sxy;
  PgBinaryArray<PgType::int4> replicate_counts;

  void add(const std::string& name, const std::optional<common::CandidateSummary>& candidate,
           CaseRowColumns& row) {
    if (!candidate) {
      for (auto* column : {&row.locations, &row.replicate_sds, &row.clock_mhz, &row.clock_sxx, &row.clock_sxy,
                           &row.energy_j, &row.power_w})
        column->null();
      row.replicates.null();
      return;
    }
    row.locations.add(candidate->location);
    row.replicates.add(candidate->replicates);
    add_or_null(row.replicate_sds, candidate->replicate_sd);
    names.add(name);
    locations.add(candidate->location);
    replicate_counts.add(candidate->replicates);
    add_or_null(replicate_sds, candidate->replicate_sd);
    const common::RunClock& clock = candidate->clock;
    for (auto [stored, in_row, value] : {std::tuple{&clocks, &row.clock_mhz, clock.mhz},
                                         {&clock_sxx, &row.clock_sxx, clock.sxx},
                                         {&clock_sxy, &row.clock_sxy, clock.sxy}}) {
      if (clock.mhz > 0) {
        stored->add(value);
        in_row->add(value);
      } else {
        stored->null();
        in_row->null();
      }
    }
    add_or_null(row.energy_j, candidate->energy_j);
    add_or_null(row.power_w, candidate->power_w);
  }
};

}  // namespace

StoredRun RunRepository::store(pqxx::work& tx, std::int64_t project_id, const common::RunReport& report,
                               const std::vector<common::CaseSummary>& summaries,
                               const nlohmann::json& document, const std::string& canonical,
                               std::optional<std::int64_t> job_id) {
  using nlohmann::json;
  std::string sha = common::sha256_hex(canonical);
  std::optional<std::string> job_text;
  if (job_id) job_text = std::to_string(*job_id);
  std::string device = report.device ? document.at("device").dump() : "null";
  pqxx::result inserted =
      tx.exec_prepared("run_insert", project_id, nullable(job_text), report.commit, report.branch,
                       nullable(report.base_commit), report.agent.name, report.agent.version,
                       report.agent.host, report.device ? report.device->name : "none", device,
                       report.started_at, report.finished_at, report.gpu_seconds, sha,
                       document.contains("git") ? document.at("git").dump() : "null", common::kRuleVersion);
  if (inserted.empty()) return *find_stored(tx, project_id, canonical);
  std::int64_t run_id = inserted[0][0].as<std::int64_t>();

  json stages = json::array();
  for (const common::Stage& stage : report.stages) stages.push_back(common::to_json(stage));
  tx.exec_prepared("run_insert_stages", run_id, stages.dump());

  // The cases' ids now, their rows once the run is judged (store_cases).
  auto rows = std::make_shared<CaseRowColumns>();
  for (const auto& row :
       tx.exec_params("SELECT nextval(pg_get_serial_sequence('cases', 'id')) FROM generate_series(1, $1)",
                      static_cast<std::int64_t>(report.cases.size())))
    rows->ids.add(parse_pg_number<std::int64_t>(std::string_view(row[0].c_str(), row[0].size())));
  MeasurementColumns measurements;
  LaunchColumns launches;
  LocationColumns locations;
  const json& posted_cases = document.at("cases");
  for (std::size_t i = 0; i < report.cases.size(); ++i) {
    const common::Case& c = report.cases[i];
    const common::CaseSummary& summary = summaries.at(i);
    rows->add(c, posted_cases[i]);
    for (std::size_t k = 0; k < c.launches.size(); ++k) launches.add(i, k, c.launches[k]);
    for (const common::Measurement& m : c.measurements) measurements.add(i, m, "head");
    for (const common::Measurement& m : c.base_measurements) measurements.add(i, m, "base");
    json median_by_impl = json::object(), bands = json::object();
    for (const auto& [impl, median] : summary.medians) median_by_impl[impl] = median;
    for (const auto& [impl, band] : summary.bands) bands[impl] = {band.first, band.second};
    rows->medians.add(median_by_impl.dump());
    rows->bands.add(bands.dump());
    locations.add(c.name, summary.candidate, *rows);
  }
  const MeasurementColumns& m = measurements;
  const LaunchColumns& l = launches;
  const LocationColumns& at = locations;
  tx.exec_prepared(
      "run_insert_cases", run_id, rows->ids.param(), m.ordinals.param(), m.sides.param(), m.impls.param(),
      m.firsts.param(), m.lasts.param(), m.clocked.param(), m.medians.param(), m.flops.param(),
      m.bytes.param(), m.peaks.param(), m.throttled.param(), m.replicates.param(), m.replicate_sizes.param(),
      m.energy_j.param(), m.energy_replicates.param(), m.power_w.param(), m.replicate_rules.param(),
      m.samples.param(), m.clock_param(), l.case_ordinals.param(), l.ordinals.param(), l.kernels.param(),
      l.dims.param(), l.registers.param(), l.static_smem.param(), l.dynamic_smem.param(), l.durations.param(),
      at.names.param(), at.locations.param(), at.replicate_counts.param(), at.replicate_sds.param(),
      at.clocks.param(), at.clock_sxx.param(), at.clock_sxy.param());
  return {run_id, false, "pending", project_id, std::move(rows)};
}

void RunRepository::store_cases(pqxx::work& tx, const StoredRun& stored,
                                const std::vector<std::pair<std::string, std::string>>& statuses) {
  const CaseRowColumns& c = *stored.case_rows;
  std::unordered_map<std::string_view, std::string_view> status_of;
  for (const auto& [name, status] : statuses) status_of.emplace(name, status);
  PgBinaryArray<PgType::text> status;
  for (const std::string& name : c.names) {
    auto found = status_of.find(name);
    status.add(found != status_of.end() ? found->second : std::string_view("no-baseline"));
  }
  tx.exec_prepared0("run_insert_case_rows", stored.run_id, stored.project_id, c.ids.param(),
                    c.name_column.param(), c.params.param(), c.expected_launch.param(), c.correctness.param(),
                    c.gpu_state.param(), c.medians.param(), c.bands.param(), c.locations.param(),
                    c.first_pass_replicates.param(), c.replicates.param(), c.replicate_sds.param(),
                    c.clock_mhz.param(), c.clock_sxx.param(), c.clock_sxy.param(), c.energy_j.param(),
                    c.power_w.param(), status.param(), c.fingerprint.param(), c.identical_to_base.param(),
                    c.audit.param(), c.changed_from_base.param());
}

void RunRepository::advance_case_heads(pqxx::work& tx, std::int64_t run_id) {
  tx.exec_prepared0("run_advance_case_heads", run_id);
}

std::optional<StoredRun> RunRepository::find_stored(pqxx::work& tx, std::int64_t project_id,
                                                    const std::string& canonical) {
  pqxx::result rows =
      tx.exec_params("SELECT id, verdict FROM runs WHERE project_id = $1 AND report_sha256 = $2", project_id,
                     common::sha256_hex(canonical));
  if (rows.empty()) return std::nullopt;
  StoredRun stored;
  stored.run_id = rows[0][0].as<std::int64_t>();
  stored.duplicate = true;
  stored.verdict = rows[0][1].as<std::string>();
  return stored;
}

void RunRepository::set_verdict(pqxx::work& tx, std::int64_t run_id, const std::string& verdict) {
  tx.exec_params0("UPDATE runs SET verdict = $2 WHERE id = $1", run_id, verdict);
}

std::optional<RunHead> RunRepository::run_head(pqxx::work& tx, std::int64_t run_id, const Page& page) {
  pqxx::result rows = tx.exec_prepared("run_head", run_id, page.offset(), page.per_page);
  if (rows.empty()) return std::nullopt;
  return RunHead{rows[0][0].as<std::string>(), rows[0][1].as<std::int64_t>()};
}

std::string RunRepository::run_comparisons_json(pqxx::work& tx, std::int64_t run_id, std::int64_t first,
                                                std::int64_t end, const std::string& name_like) {
  return tx.exec_prepared1("run_comparisons", run_id, first, end, name_like)[0].as<std::string>();
}

std::string RunRepository::run_cases_json(pqxx::work& tx, std::int64_t run_id, std::int64_t first,
                                          std::int64_t end) {
  return tx.exec_prepared1("run_cases", run_id, first, end)[0].as<std::string>();
}

}  // namespace kw::server
