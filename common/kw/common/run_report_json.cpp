// A run report written as kernelwatch.run/1 JSON (parse_run_report reads
// it back).
#include "kw/common/run_report.hpp"

namespace kw::common {

using nlohmann::json;

namespace {

json dim3_json(const Dim3& dims) {
  return json::array({dims[0], dims[1], dims[2]});
}

}  // namespace

json to_json(const Stage& stage) {
  json out{{"name", to_string(stage.name)},    {"status", to_string(stage.status)},
           {"duration_ms", stage.duration_ms}, {"message", stage.message},
           {"log_tail", stage.log_tail},       {"details", stage.details}};
  if (stage.gpu_seconds) out["gpu_seconds"] = *stage.gpu_seconds;
  return out;
}

json to_json(const Launch& launch) {
  json l{{"kernel", launch.kernel},           {"grid", dim3_json(launch.grid)},
         {"block", dim3_json(launch.block)},  {"registers", launch.registers},
         {"static_smem", launch.static_smem}, {"dynamic_smem", launch.dynamic_smem}};
  if (launch.duration_ns) l["duration_ns"] = *launch.duration_ns;
  return l;
}

json to_json(const Case& run_case) {
  json out{{"name", run_case.name}, {"params", run_case.params}};
  if (const auto& expected = run_case.expected_launch) {
    json e{{"kernel_pattern", expected->kernel_pattern}};
    if (expected->block) e["block"] = dim3_json(*expected->block);
    if (expected->grid) e["grid"] = dim3_json(*expected->grid);
    if (expected->max_registers) e["max_registers"] = *expected->max_registers;
    if (expected->max_shared_bytes) e["max_shared_bytes"] = *expected->max_shared_bytes;
    out["expected_launch"] = std::move(e);
  }
  json launches = json::array();
  for (const Launch& launch : run_case.launches) launches.push_back(to_json(launch));
  out["launches"] = std::move(launches);
  if (const auto& c = run_case.correctness) {
    out["correctness"] = json{{"passed", c->passed},
                              {"rel_l2_err", c->rel_l2_err},
                              {"max_abs_err", c->max_abs_err},
                              {"tolerance", c->tolerance},
                              {"nonfinite", c->nonfinite}};
  }
  auto measurements_json = [](const std::vector<Measurement>& list) {
    json measurements = json::array();
    for (const Measurement& m : list) {
      json j{{"impl", m.impl}, {"samples_ns", m.samples_ns}, {"median_ns", m.median_ns}};
      if (m.flops) j["flops"] = *m.flops;
      if (m.bytes) j["bytes"] = *m.bytes;
      if (m.peak_mem_bytes) j["peak_mem_bytes"] = *m.peak_mem_bytes;
      if (!m.throttled_samples.empty()) j["throttled_samples"] = m.throttled_samples;
      if (!m.replicates.empty()) j["replicates"] = m.replicates;
      if (!m.sm_mhz.empty()) j["sm_mhz"] = m.sm_mhz;
      if (m.replicate_location != ReplicateLocation::trimmed_mean)
        j["replicate_location"] = to_string(m.replicate_location);
      if (!m.energy_j.empty()) {
        j["energy_j"] = m.energy_j;
        j["energy_replicates"] = m.energy_replicates;
        j["power_w"] = m.power_w;
      }
      measurements.push_back(std::move(j));
    }
    return measurements;
  };
  out["measurements"] = measurements_json(run_case.measurements);
  if (!run_case.base_measurements.empty())
    out["base_measurements"] = measurements_json(run_case.base_measurements);
  if (run_case.first_pass_replicates) out["first_pass_replicates"] = *run_case.first_pass_replicates;
  if (run_case.fingerprint) out["fingerprint"] = *run_case.fingerprint;
  if (run_case.identical_to_base) out["identical_to_base"] = true;
  if (run_case.audit) out["audit"] = true;
  if (run_case.changed_from_base) out["changed_from_base"] = *run_case.changed_from_base;
  if (const auto& g = run_case.gpu_state) {
    json state{{"sm_mhz", g->sm_mhz}, {"mem_mhz", g->mem_mhz}, {"throttle_reasons", g->throttle_reasons}};
    if (g->temp_c_max) state["temp_c_max"] = *g->temp_c_max;
    if (g->power_w_max) state["power_w_max"] = *g->power_w_max;
    out["gpu_state"] = std::move(state);
  }
  return out;
}

json to_json(const RunReport& report) {
  json out{{"schema", report.schema},
           {"project", report.project},
           {"commit", report.commit},
           {"branch", report.branch},
           {"agent", {{"name", report.agent.name}, {"version", report.agent.version}}},
           {"started_at", report.started_at},
           {"finished_at", report.finished_at},
           {"gpu_seconds", report.gpu_seconds}};
  if (!report.agent.host.empty()) out["agent"]["host"] = report.agent.host;
  if (report.base_commit) out["base_commit"] = *report.base_commit;
  if (report.job_id) out["job_id"] = *report.job_id;
  if (const auto& git = report.git) {
    out["git"] = {{"tree", git->tree}, {"parents", git->parents}};
    for (auto [key, text] : {std::pair{"author", &git->author}, std::pair{"subject", &git->subject},
                             std::pair{"committed_at", &git->committed_at}}) {
      if (!text->empty()) out["git"][key] = *text;
    }
  }
  if (report.thresholds) out["thresholds"] = to_json(*report.thresholds);
  if (report.base_thresholds) out["base_thresholds"] = to_json(*report.base_thresholds);
  if (const auto& d = report.device) {
    json device{{"name", d->name},
                {"uuid", d->uuid},
                {"driver", d->driver},
                {"cuda_runtime", d->cuda_runtime},
                {"memory_bytes", d->memory_bytes},
                {"l2_bytes", d->l2_bytes}};
    if (d->kind != "gpu") device["kind"] = d->kind;
    if (!d->compute_capability.empty()) device["compute_capability"] = d->compute_capability;
    if (d->sm_count > 0) device["sm_count"] = d->sm_count;
    out["device"] = std::move(device);
  }
  json stages = json::array();
  for (const Stage& stage : report.stages) stages.push_back(to_json(stage));
  out["stages"] = std::move(stages);
  json cases = json::array();
  for (const Case& run_case : report.cases) cases.push_back(to_json(run_case));
  out["cases"] = std::move(cases);
  if (report.shard) out["shard"] = {{"index", report.shard->index + 1}, {"count", report.shard->count}};
  if (!report.shards.empty()) {
    json origins = json::array();
    for (const ShardOrigin& o : report.shards) {
      json origin{{"index", o.index}, {"agent", o.agent}, {"cases", o.cases}};
      if (o.job_id) origin["job_id"] = *o.job_id;
      for (auto [key, text] :
           {std::pair{"host", &o.host}, std::pair{"gpu_uuid", &o.gpu_uuid},
            std::pair{"started_at", &o.started_at}, std::pair{"finished_at", &o.finished_at}}) {
        if (!text->empty()) origin[key] = *text;
      }
      origins.push_back(std::move(origin));
    }
    out["shards"] = std::move(origins);
  }
  return out;
}

}  // namespace kw::common
