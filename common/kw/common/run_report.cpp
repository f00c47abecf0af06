#include "kw/common/run_report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <initializer_list>
#include <set>

#include "kw/common/in_parts.hpp"
#include "kw/common/json_reader.hpp"
#include "kw/common/run_report_case.hpp"
#include "kw/common/stats.hpp"

namespace kw::common {

namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 3> kStageStatuses = {"passed", "failed", "skipped"};

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
