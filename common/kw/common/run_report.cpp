#include "kw/common/run_report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <initializer_list>
#include <set>

#include "kw/common/in_parts.hpp"
#include "kw/common/json_reader.hpp"
#include "kw/common/stats.hpp"

namespace kw::common {

namespace {

constexpr double kMinSampleNs = 1e-6, kMaxSampleNs = 1e18;

using nlohmann::json;

constexpr std::array<std::string_view, 3> kStageStatuses = {"passed", "failed", "skipped"};

Dim3 read_dim3(const json& value, const std::string& path) {
  if (!value.is_array() || value.size() != 3)
    JsonReader::fail(path, "must be an array of 3 positive integers");
  Dim3 dims{};
  for (std::size_t i = 0; i < 3; ++i)
    dims[i] = JsonReader::as_integer(value[i], index_path(path, i), 1, kMaxInt32);
  return dims;
}

std::string read_commit(JsonReader& reader, std::string_view key, bool required) {
  std::optional<std::string> text =
      required ? std::optional(reader.string(key, true)) : reader.opt_string(key);
  if (!text) return {};
  if (!is_commit_sha(*text)) {
    JsonReader::fail(reader.child(key),
                     "must be a 40-character lowercase hex commit SHA, got \"" + text->substr(0, 64) + "\"");
  }
  return *text;
}

CommitInfo read_git(const json& value) {
  JsonReader reader(value, "git");
  CommitInfo git;
  git.tree = read_commit(reader, "tree", true);
  if (const json* parents = reader.opt_array("parents")) {
    for (std::size_t i = 0; i < parents->size(); ++i) {
      std::string parent = JsonReader::as_string((*parents)[i], index_path("git.parents", i), false, 40);
      if (!is_commit_sha(parent))
        JsonReader::fail(index_path("git.parents", i), "must be a 40-character lowercase hex commit SHA");
      git.parents.push_back(std::move(parent));
    }
  }
  git.author = reader.string_or_empty("author", kMaxNameBytes);
  git.subject = reader.string_or_empty("subject");
  git.committed_at = reader.string_or_empty("committed_at", kMaxNameBytes);
  if (!git.committed_at.empty() && !parse_rfc3339(git.committed_at))
    JsonReader::fail("git.committed_at", "must be an RFC 3339 timestamp, got \"" + git.committed_at + "\"");
  reader.reject_unknown_keys();
  return git;
}

AgentInfo read_agent(const json& value) {
  JsonReader reader(value, "agent");
  AgentInfo agent;
  agent.name = reader.name("name");
  agent.version = reader.name("version");
  agent.host = reader.string_or_empty("host", kMaxNameBytes);
  reader.reject_unknown_keys();
  return agent;
}

DeviceInfo read_device(const json& value) {
  JsonReader reader(value, "device");
  DeviceInfo device;
  device.kind = reader.opt_string("kind", kMaxNameBytes).value_or("gpu");
  if (device.kind != "gpu" && device.kind != "cpu")
    JsonReader::fail("device.kind", "must be \"gpu\" or \"cpu\", got \"" + device.kind + "\"");
  const bool gpu = device.kind == "gpu";
  device.name = reader.name("name");
  device.uuid = reader.string_or_empty("uuid", kMaxNameBytes);
  device.compute_capability =
      gpu ? reader.name("compute_capability") : reader.string_or_empty("compute_capability", kMaxNameBytes);
  if (!device.compute_capability.empty()) {
    const std::string& cc = device.compute_capability;
    auto dot = cc.find('.');
    bool ok = dot != std::string::npos && dot > 0 && dot + 1 < cc.size() &&
              std::all_of(cc.begin(), cc.end(),
                          [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; }) &&
              cc.find('.', dot + 1) == std::string::npos;
    if (!ok) JsonReader::fail("device.compute_capability", "must look like \"9.0\", got \"" + cc + "\"");
  }
  device.driver = reader.string_or_empty("driver", kMaxNameBytes);
  device.cuda_runtime = reader.string_or_empty("cuda_runtime", kMaxNameBytes);
  device.memory_bytes = reader.integer("memory_bytes", 1);
  device.sm_count = gpu ? reader.integer("sm_count", 1) : reader.opt_integer("sm_count", 1).value_or(0);
  device.l2_bytes = reader.opt_integer("l2_bytes", 0).value_or(0);
  reader.reject_unknown_keys();
  return device;
}

Stage read_stage(const json& value, const std::string& path) {
  JsonReader reader(value, path);
  Stage stage;
  std::string name = reader.string("name");
  auto parsed_name = stage_name_from(name);
  if (!parsed_name) {
    JsonReader::fail(reader.child("name"), "unknown stage \"" + name +
                                               "\" (expected build, load, launch_geometry, correctness, "
                                               "quick_bench or full_bench)");
  }
  stage.name = *parsed_name;
  std::string status = reader.string("status");
  auto parsed_status = stage_status_from(status);
  if (!parsed_status) {
    JsonReader::fail(reader.child("status"),
                     "unknown status \"" + status + "\" (expected passed, failed or skipped)");
  }
  stage.status = *parsed_status;
  stage.duration_ms = reader.integer("duration_ms", 0);
  stage.gpu_seconds = reader.opt_number("gpu_seconds", 0);
  stage.message = reader.string_or_empty("message");
  stage.log_tail = reader.string_or_empty("log_tail");
  if (const json* details = reader.find("details")) {
    if (!details->is_object()) JsonReader::fail(reader.child("details"), "must be an object", "wrong_type");
    if (stage.name == StageName::build) check_build_details(*details, reader.child("details"));
    stage.details = *details;
  }
  if (stage.status != StageStatus::passed && stage.message.empty()) {
    JsonReader::fail(reader.child("message"),
                     "must say why when the stage is " + std::string(to_string(stage.status)));
  }
  reader.reject_unknown_keys();
  return stage;
}

ExpectedLaunch read_expected_launch(const json& value, const std::string& path) {
  JsonReader reader(value, path);
  ExpectedLaunch expected;
  expected.kernel_pattern = reader.string("kernel_pattern");
  if (const json* block = reader.find("block")) expected.block = read_dim3(*block, reader.child("block"));
  if (const json* grid = reader.find("grid")) expected.grid = read_dim3(*grid, reader.child("grid"));
  expected.max_registers = reader.opt_integer("max_registers", 1);
  expected.max_shared_bytes = reader.opt_integer("max_shared_bytes", 0);
  reader.reject_unknown_keys();
  return expected;
}

Launch read_launch(const json& value, const std::string& path) {
  JsonReader reader(value, path);
  Launch launch;
  launch.kernel = reader.string("kernel");
  launch.grid = read_dim3(reader.require("grid"), reader.child("grid"));
  launch.block = read_dim3(reader.require("block"), reader.child("block"));
  launch.registers = reader.integer("registers", 0, kMaxInt32);
  launch.static_smem = reader.integer("static_smem", 0);
  launch.dynamic_smem = reader.integer("dynamic_smem", 0);
  launch.duration_ns = reader.opt_number("duration_ns", 0);
  reader.reject_unknown_keys();
  return launch;
}

Correctness read_correctness(const json& value, const std::string& path) {
  JsonReader reader(value, path);
  Correctness correctness;
  correctness.passed = reader.boolean("passed");
  correctness.rel_l2_err = reader.number("rel_l2_err", 0);
  correctness.max_abs_err = reader.number("max_abs_err", 0);
  correctness.tolerance = reader.number("tolerance", 0);
  correctness.nonfinite = reader.integer("nonfinite", 0);
  if (correctness.passed && correctness.nonfinite > 0) {
    JsonReader::fail(reader.child("passed"), "cannot be true with non-finite outputs", "inconsistent");
  }
  if (correctness.passed && correctness.rel_l2_err > correctness.tolerance) {
    JsonReader::fail(reader.child("passed"), "cannot be true when rel_l2_err exceeds tolerance",
                     "inconsistent");
  }
  reader.reject_unknown_keys();
  return correctness;
}

// An optional array of one value per sample (`what` names one in errors),
// each read by `read(value, path)`; empty when absent.
template <typename T, typename Read>
std::vector<T> read_per_sample(JsonReader& reader, const char* key, const std::string& what,
                               std::size_t samples, Read read) {
  std::vector<T> values;
  const json* array = reader.opt_array(key);
  if (array == nullptr) return values;
  const std::string path = reader.child(key);
  if (array->size() != samples) {
    JsonReader::fail(path,
                     "must hold one " + what + " per sample (" + std::to_string(samples) + "), got " +
                         std::to_string(array->size()),
                     "inconsistent");
  }
  values.reserve(array->size());
  for (std::size_t i = 0; i < array->size(); ++i) values.push_back(read((*array)[i], index_path(path, i)));
  return values;
}

// energy_j, energy_replicates and power_w: all three or none, one of each
// per replicate that measured energy, each replicate once and among the
// samples' replicates.
void read_energy(JsonReader& reader, Measurement& measurement) {
  const json* energy = reader.opt_array("energy_j");
  if (energy == nullptr) {
    for (const char* key : {"energy_replicates", "power_w"}) {
      if (reader.find(key) != nullptr)
        JsonReader::fail(reader.child(key), "needs energy_j beside it", "inconsistent");
    }
    return;
  }
  auto positive = [](const char* unit) {
    return [unit](const json& number, const std::string& at) {
      double value = JsonReader::as_number(number, at, 0);
      if (!std::isfinite(value) || value <= 0)
        JsonReader::fail(at, std::string("must be ") + unit + " > 0 (absent where not measured, never 0)",
                         "out_of_range");
      return value;
    };
  };
  measurement.energy_j =
      read_per_sample<double>(reader, "energy_j", "value", energy->size(), positive("joules"));
  if (reader.opt_array("energy_replicates") == nullptr)
    JsonReader::fail(reader.child("energy_replicates"), "is required with energy_j", "missing_field");
  if (reader.opt_array("power_w") == nullptr)
    JsonReader::fail(reader.child("power_w"), "is required with energy_j", "missing_field");
  std::set<std::int64_t> sample_replicates(measurement.replicates.begin(), measurement.replicates.end());
  if (measurement.replicates.empty()) sample_replicates.insert(0);
  std::set<std::int64_t> seen;
  measurement.energy_replicates = read_per_sample<std::int64_t>(
      reader, "energy_replicates", "replicate index per energy_j value", energy->size(),
      [&](const json& index, const std::string& at) {
        std::int64_t replicate = JsonReader::as_integer(index, at, 0, kMaxInt32);
        if (!sample_replicates.count(replicate))
          JsonReader::fail(at, "replicate " + std::to_string(replicate) + " has no samples", "inconsistent");
        if (!seen.insert(replicate).second)
          JsonReader::fail(at, "replicate " + std::to_string(replicate) + " twice", "inconsistent");
        return replicate;
      });
  measurement.power_w = read_per_sample<double>(reader, "power_w", "power per energy_j value", energy->size(),
                                                positive("watts"));
}

Measurement read_measurement(const json& value, const std::string& path) {
  JsonReader reader(value, path);
  Measurement measurement;
  measurement.impl = reader.name("impl");
  if (measurement.impl != "candidate" &&
      !(measurement.impl.starts_with("baseline:") && measurement.impl.size() > 9)) {
    JsonReader::fail(reader.child("impl"),
                     "must be \"candidate\" or \"baseline:<name>\", got \"" + measurement.impl + "\"");
  }
  const json& samples = reader.array("samples_ns");
  std::string samples_path = reader.child("samples_ns");
  if (samples.empty()) JsonReader::fail(samples_path, "must hold at least one sample", "empty");
  measurement.samples_ns.reserve(samples.size());
  // The path of a sample is built only for an error: a run holds tens of
  // thousands of samples.
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const json& sample = samples[i];
    if (!sample.is_number()) {
      JsonReader::fail(index_path(samples_path, i), "must be a number, got " + type_name(sample),
                       "wrong_type");
    }
    double ns = sample.get<double>();
    if (!std::isfinite(ns) || ns <= 0)
      JsonReader::fail(index_path(samples_path, i), "must be finite and > 0", "out_of_range");
    // The store keeps samples as float4.
    if (ns < kMinSampleNs)
      JsonReader::fail(index_path(samples_path, i), "is too close to 0 to store, got " + sample.dump(),
                       "out_of_range");
    if (ns > kMaxSampleNs)
      JsonReader::fail(index_path(samples_path, i),
                       "is too large to store (over 1e18 ns), got " + sample.dump(), "out_of_range");
    measurement.samples_ns.push_back(ns);
  }
  measurement.median_ns = reader.number("median_ns", 0);
  double computed = median(measurement.samples_ns);
  if (std::abs(measurement.median_ns - computed) > 1e-6 * computed + 1e-9) {
    JsonReader::fail(reader.child("median_ns"),
                     "is " + json(measurement.median_ns).dump() + " but the median of samples_ns is " +
                         json(computed).dump(),
                     "inconsistent");
  }
  measurement.flops = reader.opt_number("flops", 0);
  measurement.bytes = reader.opt_number("bytes", 0);
  measurement.peak_mem_bytes = reader.opt_integer("peak_mem_bytes", 0);
  if (const json* throttled = reader.opt_array("throttled_samples")) {
    std::string throttled_path = reader.child("throttled_samples");
    for (std::size_t i = 0; i < throttled->size(); ++i) {
      std::int64_t index =
          JsonReader::as_integer((*throttled)[i], index_path(throttled_path, i), 0, kMaxInt32);
      if (index >= static_cast<std::int64_t>(measurement.samples_ns.size())) {
        JsonReader::fail(index_path(throttled_path, i),
                         "sample index " + std::to_string(index) + " is past the end of samples_ns");
      }
      measurement.throttled_samples.push_back(index);
    }
  }
  measurement.replicates =
      read_per_sample<std::int64_t>(reader, "replicates", "replicate index", measurement.samples_ns.size(),
                                    [](const json& index, const std::string& at) {
                                      return JsonReader::as_integer(index, at, 0, kMaxInt16);
                                    });
  measurement.sm_mhz = read_per_sample<double>(
      reader, "sm_mhz", "clock", measurement.samples_ns.size(), [](const json& clock, const std::string& at) {
        double mhz = JsonReader::as_number(clock, at, 0);
        if (!std::isfinite(mhz) || mhz <= 0 || mhz > 1e5)
          JsonReader::fail(at, "must be a clock in MHz, > 0 and <= 100000", "out_of_range");
        return mhz;
      });
  read_energy(reader, measurement);
  if (std::optional<std::string> rule = reader.opt_string("replicate_location", 32)) {
    std::optional<ReplicateLocation> known = replicate_location_from(*rule);
    if (!known)
      JsonReader::fail(reader.child("replicate_location"),
                       "must be \"trimmed_mean\" or \"minimum\", got " + json(*rule).dump(), "out_of_range");
    measurement.replicate_location = *known;
  }
  reader.reject_unknown_keys();
  return measurement;
}

std::vector<double> read_number_array(JsonReader& reader, std::string_view key) {
  std::vector<double> numbers;
  if (const json* array = reader.opt_array(key)) {
    for (std::size_t i = 0; i < array->size(); ++i) {
      numbers.push_back(JsonReader::as_number((*array)[i], index_path(reader.child(key), i), 0));
    }
  }
  return numbers;
}

GpuState read_gpu_state(const json& value, const std::string& path) {
  JsonReader reader(value, path);
  GpuState state;
  state.sm_mhz = read_number_array(reader, "sm_mhz");
  state.mem_mhz = read_number_array(reader, "mem_mhz");
  state.throttle_reasons = static_cast<std::uint64_t>(reader.opt_integer("throttle_reasons", 0).value_or(0));
  state.temp_c_max = reader.opt_number("temp_c_max", -273.15);
  state.power_w_max = reader.opt_number("power_w_max", 0);
  reader.reject_unknown_keys();
  return state;
}

bool is_digest(const json& value) {
  if (!value.is_string()) return false;
  const std::string& text = value.get_ref<const std::string&>();
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// A case's fingerprint names the kernels, host files and sources it runs:
// thousands at the most. Past this a report stores a case's worth of
// nothing many times over.
constexpr std::size_t kMaxFingerprintEntries = 4096;

std::size_t entries_in(const json& value) {
  if (!value.is_structured()) return 1;
  std::size_t entries = 0;
  for (const json& item : value) entries += entries_in(item);
  return std::max<std::size_t>(entries, 1);
}

// What a reader needs to see why a case was timed: a few lines, never a
// case's worth of data.
constexpr std::size_t kMaxDifferences = 64;
constexpr std::size_t kMaxDifferenceBytes = 1024;

// changed_from_base: {"differs": [text, ...], "base": {"digest"} or {"unknown"}}.
void read_changed_from_base(JsonReader& reader, Case& run_case) {
  const json* changed = reader.find("changed_from_base");
  if (changed == nullptr) return;
  const std::string path = reader.child("changed_from_base");
  if (!changed->is_object()) JsonReader::fail(path, "must be an object", "wrong_type");
  if (run_case.identical_to_base)
    JsonReader::fail(path, "a case identical to its base has nothing changed from it", "inconsistent");
  for (const auto& [key, value] : changed->items()) {
    if (key != "differs" && key != "base")
      JsonReader::fail(path + "." + key, "is not a field of changed_from_base (differs, base)",
                       "unknown_field");
  }
  const json& differs = changed->contains("differs") ? (*changed)["differs"] : json();
  if (!differs.is_array() || differs.empty())
    JsonReader::fail(path + ".differs", "must be a non-empty array of what differs from the base",
                     "missing_field");
  if (differs.size() > kMaxDifferences)
    JsonReader::fail(
        path + ".differs",
        "has " + std::to_string(differs.size()) + " entries, at most " + std::to_string(kMaxDifferences),
        "too_large");
  for (std::size_t i = 0; i < differs.size(); ++i) {
    if (!differs[i].is_string() || differs[i].get_ref<const std::string&>().empty() ||
        differs[i].get_ref<const std::string&>().size() > kMaxDifferenceBytes)
      JsonReader::fail(path + ".differs[" + std::to_string(i) + "]",
                       "must be a text of 1 to " + std::to_string(kMaxDifferenceBytes) + " bytes");
  }
  const json& base = changed->contains("base") ? (*changed)["base"] : json();
  const bool digest =
      base.is_object() && base.size() == 1 && base.contains("digest") && is_digest(base["digest"]);
  const bool unknown = base.is_object() && base.size() == 1 && base.contains("unknown") &&
                       base["unknown"].is_string() &&
                       base["unknown"].get_ref<const std::string&>().size() <= kMaxDifferenceBytes;
  if (!digest && !unknown)
    JsonReader::fail(path + ".base",
                     "must be {\"digest\": 64 lower-case hex digits} or {\"unknown\": \"why\"} (the base's "
                     "fingerprint)",
                     "missing_field");
  run_case.changed_from_base = *changed;
}

// fingerprint, identical_to_base and audit, each consistent with the others
// and with the measurements.
void read_fingerprint(JsonReader& reader, Case& run_case) {
  if (const json* fingerprint = reader.find("fingerprint")) {
    const std::string path = reader.child("fingerprint");
    if (!fingerprint->is_object()) JsonReader::fail(path, "must be an object", "wrong_type");
    for (const auto& [key, value] : fingerprint->items()) {
      if (key != "digest" && key != "parts" && key != "unknown")
        JsonReader::fail(path + "." + key, "is not a fingerprint's field (digest, parts, unknown)",
                         "unknown_field");
    }
    if (fingerprint->contains("digest") && fingerprint->contains("unknown"))
      JsonReader::fail(path, "holds a digest or says why it is unknown, not both", "inconsistent");
    if (fingerprint->contains("parts") && !fingerprint->contains("digest"))
      JsonReader::fail(path + ".parts", "goes with a digest", "inconsistent");
    if (fingerprint->contains("digest")) {
      if (!is_digest((*fingerprint)["digest"]))
        JsonReader::fail(path + ".digest", "must be 64 lower-case hex digits");
      if (!fingerprint->contains("parts") || !(*fingerprint)["parts"].is_object())
        JsonReader::fail(path + ".parts", "must be an object (what the digest covers)", "missing_field");
      if (const std::size_t entries = entries_in((*fingerprint)["parts"]); entries > kMaxFingerprintEntries)
        JsonReader::fail(path + ".parts",
                         "has " + std::to_string(entries) + " entries, more than the " +
                             std::to_string(kMaxFingerprintEntries) + " a case's fingerprint may hold",
                         "too_large");
    } else if (!fingerprint->contains("unknown") || !(*fingerprint)["unknown"].is_string()) {
      JsonReader::fail(path, "must hold a digest and its parts, or say why it is unknown", "missing_field");
    }
    run_case.fingerprint = *fingerprint;
  }
  const bool known = run_case.fingerprint && run_case.fingerprint->contains("digest");
  for (auto [key, into] :
       {std::pair{"identical_to_base", &run_case.identical_to_base}, std::pair{"audit", &run_case.audit}}) {
    if (reader.find(key) == nullptr) continue;
    *into = reader.boolean(key);
    if (*into && !known)
      JsonReader::fail(reader.child(key), "needs the case's fingerprint (fingerprint.digest)",
                       "inconsistent");
  }
  if (run_case.identical_to_base && (!run_case.measurements.empty() || !run_case.base_measurements.empty()))
    JsonReader::fail(reader.child("identical_to_base"), "a case identical to its base is not measured",
                     "inconsistent");
  if (run_case.audit && run_case.base_measurements.empty())
    JsonReader::fail(reader.child("audit"), "an audited case is measured on both sides (base_measurements)",
                     "inconsistent");
  read_changed_from_base(reader, run_case);
}

Case read_case(const json& value, const std::string& path) {
  JsonReader reader(value, path);
  Case run_case;
  run_case.name = reader.name("name");
  if (const json* params = reader.find("params")) {
    if (!params->is_object()) JsonReader::fail(reader.child("params"), "must be an object", "wrong_type");
    for (const auto& [key, param] : params->items()) {
      if (param.is_object() || param.is_array()) {
        JsonReader::fail(reader.child("params") + "." + key, "must be a string, number or boolean");
      }
    }
    run_case.params = *params;
  }
  if (const json* expected = reader.find("expected_launch")) {
    run_case.expected_launch = read_expected_launch(*expected, reader.child("expected_launch"));
  }
  if (const json* launches = reader.opt_array("launches")) {
    for (std::size_t i = 0; i < launches->size(); ++i) {
      run_case.launches.push_back(read_launch((*launches)[i], index_path(reader.child("launches"), i)));
    }
  }
  if (const json* correctness = reader.find("correctness")) {
    run_case.correctness = read_correctness(*correctness, reader.child("correctness"));
  }
  for (auto [key, into] : {std::pair{"measurements", &run_case.measurements},
                           std::pair{"base_measurements", &run_case.base_measurements}}) {
    const json* measurements = reader.opt_array(key);
    if (!measurements) continue;
    std::set<std::string, std::less<>> impls;
    for (std::size_t i = 0; i < measurements->size(); ++i) {
      std::string measurement_path = index_path(reader.child(key), i);
      Measurement measurement = read_measurement((*measurements)[i], measurement_path);
      if (!impls.insert(measurement.impl).second) {
        JsonReader::fail(measurement_path + ".impl",
                         "duplicate implementation \"" + measurement.impl + "\" in this case");
      }
      into->push_back(std::move(measurement));
    }
  }
  run_case.first_pass_replicates = reader.opt_integer("first_pass_replicates", 1, kMaxInt32);
  if (const json* gpu_state = reader.find("gpu_state")) {
    run_case.gpu_state = read_gpu_state(*gpu_state, reader.child("gpu_state"));
  }
  read_fingerprint(reader, run_case);
  reader.reject_unknown_keys();
  return run_case;
}

}  // namespace

std::string_view to_string(StageStatus status) {
  return kStageStatuses[static_cast<std::size_t>(status)];
}

std::optional<StageStatus> stage_status_from(std::string_view text) {
  for (std::size_t i = 0; i < kStageStatuses.size(); ++i) {
    if (kStageStatuses[i] == text) return static_cast<StageStatus>(i);
  }
  return std::nullopt;
}

const Measurement* Case::candidate() const {
  for (const Measurement& measurement : measurements) {
    if (measurement.is_candidate()) return &measurement;
  }
  return nullptr;
}

const Measurement* Case::base_candidate() const {
  for (const Measurement& measurement : base_measurements) {
    if (measurement.is_candidate()) return &measurement;
  }
  return nullptr;
}

const Stage* RunReport::stage(StageName name) const {
  for (const Stage& s : stages) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

void check_project_name(const std::string& name, const std::string& path) {
  if (name.empty() || name.size() > kMaxNameBytes)
    JsonReader::fail(path, "must be 1 to " + std::to_string(kMaxNameBytes) + " bytes long");
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      JsonReader::fail(path, "may hold only letters, digits, '-', '_' and '.'");
  }
}

bool is_commit_sha(std::string_view text) {
  return text.size() == 40 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::optional<double> parse_rfc3339(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
  auto digits = [&](std::size_t pos, std::size_t count) -> std::optional<int> {
    if (pos + count > text.size()) return std::nullopt;
    int value = 0;
    for (std::size_t i = pos; i < pos + count; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      value = value * 10 + (text[i] - '0');
    }
    return value;
  };
  auto year = digits(0, 4), month = digits(5, 2), day = digits(8, 2);
  auto hour = digits(11, 2), minute = digits(14, 2), second = digits(17, 2);
  if (!year || !month || !day || !hour || !minute || !second || text.size() < 20) return std::nullopt;
  if (text[4] != '-' || text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' ||
      text[16] != ':')
    return std::nullopt;
  if (*month < 1 || *month > 12 || *day < 1 || *hour > 23 || *minute > 59 || *second > 60)
    return std::nullopt;
  // A date the store can hold: 1970 to 9999, a day the month has.
  const bool leap = (*year % 4 == 0 && *year % 100 != 0) || *year % 400 == 0;
  constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (*year < 1970 || *day > kDays[*month - 1] + (*month == 2 && leap ? 1 : 0)) return std::nullopt;
  std::size_t pos = 19;
  double fraction = 0;
  if (text[pos] == '.') {
    double scale = 0.1;
    ++pos;
    std::size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      fraction += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  int offset_minutes = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    auto off_h = digits(pos + 1, 2), off_m = digits(pos + 4, 2);
    if (!off_h || !off_m || pos + 6 > text.size() || text[pos + 3] != ':') return std::nullopt;
    offset_minutes = (*off_h * 60 + *off_m) * (text[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;
  // days_from_civil (Howard Hinnant's algorithm)
  int y = *year - (*month <= 2 ? 1 : 0);
  int era = (y >= 0 ? y : y - 399) / 400;
  int yoe = y - era * 400;
  int doy = (153 * (*month + (*month > 2 ? -3 : 9)) + 2) / 5 + *day - 1;
  int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  double days = era * 146097.0 + doe - 719468.0;
  return days * 86400.0 + *hour * 3600.0 + *minute * 60.0 + *second + fraction - offset_minutes * 60.0;
}

namespace {

// The report's cases into `report`; whether any has a measurement. Each
// case is read on its own, on every core; what ties cases together is
// checked after, in order, so the first fault in the report is the one
// named, as when they were read one by one.
bool read_cases(const json& cases, RunReport& report) {
  struct Part {
    std::vector<Case> cases;
    std::exception_ptr fault;  // of the case after the last one read
  };
  std::vector<Part> parts = in_parts(cases.size(), 256, [&](std::size_t begin, std::size_t end) {
    Part part;
    part.cases.reserve(end - begin);
    try {
      for (std::size_t i = begin; i < end; ++i)
        part.cases.push_back(read_case(cases[i], index_path("cases", i)));
    } catch (...) {
      part.fault = std::current_exception();
    }
    return part;
  });
  std::set<std::string, std::less<>> case_names;
  bool any_measurement = false;
  report.cases.reserve(cases.size());
  for (Part& part : parts) {
    for (Case& run_case : part.cases) {
      const std::string path = index_path("cases", report.cases.size());
      if (!case_names.insert(run_case.name).second) {
        JsonReader::fail(path + ".name", "duplicate case name \"" + run_case.name + "\"", "duplicate");
      }
      any_measurement = any_measurement || !run_case.measurements.empty();
      if (!run_case.base_measurements.empty() && !report.base_commit) {
        JsonReader::fail(path + ".base_measurements",
                         "needs base_commit: they are that commit's measurements", "inconsistent");
      }
      if (run_case.identical_to_base && !report.base_commit)
        JsonReader::fail(path + ".identical_to_base", "needs base_commit: the commit it is identical to",
                         "inconsistent");
      report.cases.push_back(std::move(run_case));
    }
    if (part.fault) std::rethrow_exception(part.fault);
  }
  return any_measurement;
}

ShardSpec read_shard(const json& value) {
  JsonReader reader(value, "shard");
  const std::int64_t count = reader.integer("count", 1, kMaxShards);
  const std::int64_t index = reader.integer("index", 1, count);
  reader.reject_unknown_keys();
  return {index - 1, count};
}

std::vector<ShardOrigin> read_shard_origins(const json& value) {
  std::vector<ShardOrigin> origins;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string path = index_path("shards", i);
    JsonReader reader(value[i], path);
    ShardOrigin origin;
    origin.index = reader.integer("index", 1, static_cast<std::int64_t>(value.size()));
    if (origin.index != static_cast<std::int64_t>(i) + 1)
      JsonReader::fail(reader.child("index"),
                       "must be " + std::to_string(i + 1) + ": shards in order, each once", "inconsistent");
    origin.job_id = reader.opt_integer("job_id", 1);
    origin.agent = reader.name("agent");
    origin.host = reader.string_or_empty("host", kMaxNameBytes);
    origin.gpu_uuid = reader.string_or_empty("gpu_uuid", kMaxNameBytes);
    origin.cases = reader.integer("cases", 0, static_cast<std::int64_t>(kMaxCases));
    origin.started_at = reader.string_or_empty("started_at", kMaxNameBytes);
    origin.finished_at = reader.string_or_empty("finished_at", kMaxNameBytes);
    reader.reject_unknown_keys();
    origins.push_back(std::move(origin));
  }
  if (origins.size() > static_cast<std::size_t>(kMaxShards))
    JsonReader::fail("shards",
                     "names " + std::to_string(origins.size()) + " shards; a run has at most " +
                         std::to_string(kMaxShards),
                     "too_many");
  return origins;
}

}  // namespace

RunReport parse_run_report(const json& document) {
  JsonReader reader(document, "");
  RunReport report;
  report.schema = reader.string("schema");
  if (report.schema != kRunSchema) {
    JsonReader::fail("schema",
                     "unknown schema version \"" + report.schema + "\" (this build reads \"" +
                         std::string(kRunSchema) + "\")",
                     "unknown_schema");
  }
  report.project = reader.name("project");
  check_project_name(report.project, "project");
  report.commit = read_commit(reader, "commit", true);
  report.branch = reader.name("branch");
  std::string base = read_commit(reader, "base_commit", false);
  if (!base.empty()) report.base_commit = base;
  report.job_id = reader.opt_integer("job_id", 1);
  if (const json* git = reader.find("git")) report.git = read_git(*git);
  if (const json* thresholds = reader.find("thresholds"))
    report.thresholds = parse_thresholds(*thresholds, "thresholds");
  if (const json* thresholds = reader.find("base_thresholds")) {
    if (!report.base_commit)
      JsonReader::fail("base_thresholds", "needs base_commit: they are that commit's", "inconsistent");
    report.base_thresholds = parse_thresholds(*thresholds, "base_thresholds");
  }
  report.agent = read_agent(reader.require("agent"));
  if (const json* device = reader.find("device")) report.device = read_device(*device);

  report.started_at = reader.string("started_at");
  report.finished_at = reader.string("finished_at");
  auto started = parse_rfc3339(report.started_at);
  if (!started)
    JsonReader::fail("started_at",
                     "must be an RFC 3339 timestamp from 1970 on, got \"" + report.started_at + "\"");
  auto finished = parse_rfc3339(report.finished_at);
  if (!finished)
    JsonReader::fail("finished_at",
                     "must be an RFC 3339 timestamp from 1970 on, got \"" + report.finished_at + "\"");
  if (*finished < *started) JsonReader::fail("finished_at", "is before started_at", "inconsistent");
  report.gpu_seconds = reader.number("gpu_seconds", 0);
  if (const json* shard = reader.find("shard")) report.shard = read_shard(*shard);
  if (const json* shards = reader.opt_array("shards")) {
    if (report.shard)
      JsonReader::fail("shards", "a shard's report is not itself merged from shards", "inconsistent");
    report.shards = read_shard_origins(*shards);
  }

  const json& stages = reader.array("stages");
  std::set<StageName> seen_stages;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    std::string path = index_path("stages", i);
    Stage stage = read_stage(stages[i], path);
    if (!seen_stages.insert(stage.name).second) {
      JsonReader::fail(path + ".name", "stage \"" + std::string(to_string(stage.name)) + "\" appears twice",
                       "duplicate");
    }
    if (!report.stages.empty() && stage.name < report.stages.back().name) {
      JsonReader::fail(path + ".name", "stage \"" + std::string(to_string(stage.name)) +
                                           "\" is out of pipeline order (after \"" +
                                           std::string(to_string(report.stages.back().name)) + "\")");
    }
    report.stages.push_back(std::move(stage));
  }

  const json& cases = reader.array("cases");
  if (cases.size() > kMaxCases)
    JsonReader::fail("cases",
                     "holds " + std::to_string(cases.size()) + " cases; a report holds at most " +
                         std::to_string(kMaxCases),
                     "too_many");
  const bool any_measurement = read_cases(cases, report);
  if (any_measurement && !report.device) {
    JsonReader::fail("device", "is required when any case has measurements", "missing_field");
  }
  reader.reject_unknown_keys();
  return report;
}

void check_build_details(const json& details, const std::string& path) {
  const auto kernels = details.find("kernels");
  if (kernels == details.end()) return;
  const std::string at = path + ".kernels";
  if (!kernels->is_array()) JsonReader::fail(at, "must be an array of {name, registers, ...}", "wrong_type");
  for (std::size_t i = 0; i < kernels->size(); ++i) {
    const json& row = (*kernels)[i];
    const std::string row_path = at + "[" + std::to_string(i) + "]";
    if (!row.is_object())
      JsonReader::fail(row_path, "must be an object, got " + type_name(row), "wrong_type");
    const auto name = row.find("name");
    if (name == row.end()) JsonReader::fail(row_path + ".name", "is required", "missing_field");
    JsonReader::as_string(*name, row_path + ".name", false, kMaxTextBytes);
    for (const char* key : {"registers", "shared_bytes", "spill_stores", "spill_loads"}) {
      if (const auto value = row.find(key); value != row.end())
        JsonReader::as_integer(*value, row_path + "." + key, 0, INT64_MAX);
    }
  }
}

Stage parse_stage(const json& value, const std::string& path) {
  if (!value.is_object()) JsonReader::fail(path, "must be an object", "wrong_type");
  return read_stage(value, path);
}

RunReport parse_run_report_text(std::string_view text) {
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& error) {
    throw ValidationError(
        "", "not valid JSON at byte " + std::to_string(error.byte) + ": " + std::string(error.what()));
  }
  return parse_run_report(document);
}

}  // namespace kw::common
