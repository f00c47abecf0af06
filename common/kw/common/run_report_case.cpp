#include "kw/common/run_report_case.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "kw/common/json_reader.hpp"
#include "kw/common/stats.hpp"

namespace kw::common {

namespace {

using nlohmann::json;

constexpr double kMinSampleNs = 1e-6, kMaxSampleNs = 1e18;

Dim3 read_dim3(const json& value, const std::string& path) {
  if (!value.is_array() || value.size() != 3)
    JsonReader::fail(path, "must be an array of 3 positive integers");
  Dim3 dims{};
  for (std::size_t i = 0; i < 3; ++i)
    dims[i] = JsonReader::as_integer(value[i], index_path(path, i), 1, kMaxInt32);
  return dims;
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

}  // namespace

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

}  // namespace kw::common
