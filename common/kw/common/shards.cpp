#include "kw/common/shards.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "kw/common/json_reader.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/shard_merge.hpp"

namespace kw::common {

using nlohmann::json;

ShardSpec parse_shard_spec(const std::string& text) {
  const auto slash = text.find('/');
  auto number = [&](const std::string& part, const char* what) {
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != part.size())
      throw std::invalid_argument("--shard \"" + text + "\": " + what + " is not a whole number");
    return static_cast<std::int64_t>(value);
  };
  if (slash == std::string::npos)
    throw std::invalid_argument("--shard \"" + text + "\": expected K/N, e.g. 1/2 (the first of two)");
  const std::int64_t k = number(text.substr(0, slash), "K");
  const std::int64_t n = number(text.substr(slash + 1), "N");
  if (n < 1 || n > kMaxShards)
    throw std::invalid_argument("--shard \"" + text + "\": N must be 1 to " + std::to_string(kMaxShards));
  if (k < 1 || k > n)
    throw std::invalid_argument("--shard \"" + text + "\": K must be 1 to N (" + std::to_string(n) + ")");
  return {k - 1, n};
}

std::string to_string(const ShardSpec& shard) {
  return std::to_string(shard.index + 1) + "/" + std::to_string(shard.count);
}

ShardSplit::ShardSplit(std::vector<std::string> names, ShardSpec shard) : names_(std::move(names)) {
  std::vector<std::string> sorted = names_;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (static_cast<std::int64_t>(i % static_cast<std::size_t>(shard.count)) == shard.index)
      mine_.push_back(sorted[i]);
  }
}

bool ShardSplit::contains(const std::string& name) const {
  return std::binary_search(mine_.begin(), mine_.end(), name);
}

std::vector<std::string> ShardSplit::cases() const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& name : names_) {
    if (contains(name) && seen.insert(name).second) out.push_back(name);
  }
  return out;
}

namespace {

// The last `max_bytes` of `text`, cut at a character boundary.
std::string tail_of(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t start = text.size() - max_bytes;
  while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
  return text.substr(start);
}

std::string head_of(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

std::string shard_path(std::size_t i) {
  return "shards[" + std::to_string(i) + "]";
}

// One stage as every shard that ran it reported it (shard index, stage).
json merge_stage(const std::vector<std::pair<std::int64_t, const json*>>& parts) {
  json merged = *parts.front().second;
  if (parts.size() == 1) return merged;
  bool failed = false, passed = false, all_same_message = true;
  std::int64_t duration = 0;
  std::optional<double> gpu_seconds;
  std::string messages, log_tail;
  json details = json::array();
  for (const auto& [index, stage] : parts) {
    const std::string status = stage->value("status", "skipped");
    failed = failed || status == "failed";
    passed = passed || status == "passed";
    duration = std::max(duration, stage->value("duration_ms", std::int64_t{0}));
    if (stage->contains("gpu_seconds"))
      gpu_seconds = gpu_seconds.value_or(0) + (*stage)["gpu_seconds"].get<double>();
    const std::string message = stage->value("message", "");
    all_same_message = all_same_message && message == merged.value("message", "");
    if (!message.empty())
      messages += (messages.empty() ? "" : "; ") + ("shard " + std::to_string(index + 1) + ": " + message);
    if (const std::string tail = stage->value("log_tail", ""); !tail.empty())
      log_tail += "--- shard " + std::to_string(index + 1) + "\n" + tail + (tail.back() == '\n' ? "" : "\n");
    json own = stage->value("details", json::object());
    own["shard"] = index + 1;
    details.push_back(std::move(own));
  }
  merged["status"] = failed ? "failed" : passed ? "passed" : "skipped";
  merged["duration_ms"] = duration;  // the shards ran side by side
  if (gpu_seconds) merged["gpu_seconds"] = *gpu_seconds;
  if (!all_same_message) merged["message"] = head_of(messages, kMaxTextBytes);
  merged["log_tail"] = tail_of(log_tail, kMaxTextBytes);
  // One build on every shard's host, of one commit: its kernels are the
  // first shard's. The other stages keep each shard's own word.
  if (merged["name"] != "build") merged["details"] = {{"shards", details}};
  return merged;
}

double seconds_at(const std::string& timestamp) {
  return parse_rfc3339(timestamp).value_or(0);
}

using Shards = std::vector<std::pair<RunReport, const json*>>;

// Each report on its own terms, in shard order.
Shards parse_shards(const std::vector<json>& reports) {
  if (reports.empty()) throw ValidationError("shards", "no shard reports to merge", "missing_field");
  Shards shards;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    try {
      shards.emplace_back(parse_run_report(reports[i]), &reports[i]);
      // Checked; what the merge reads of a shard is its document's cases.
      std::vector<Case>().swap(shards.back().first.cases);
    } catch (const ValidationError& error) {
      const std::string what = error.what();
      const std::string reason = what.substr(std::min(what.size(), what.find(": ") + 2));
      throw ValidationError(shard_path(i) + (error.path().empty() ? "" : "." + error.path()), reason,
                            error.code());
    }
    if (!shards.back().first.shard)
      throw ValidationError(shard_path(i) + ".shard", "is required: this report is no shard's",
                            "missing_field");
  }
  std::sort(shards.begin(), shards.end(),
            [](const auto& a, const auto& b) { return a.first.shard->index < b.first.shard->index; });
  return shards;
}

// Every shard of one job, each once, of one commit on one GPU model: the
// report of the first shard that names a device.
const json* check_one_job(const Shards& shards) {
  const RunReport& first = shards.front().first;
  const std::int64_t count = first.shard->count;
  if (static_cast<std::int64_t>(shards.size()) != count) {
    throw ValidationError(
        "shards",
        "holds " + std::to_string(shards.size()) + " report(s) of a job split in " + std::to_string(count),
        "inconsistent");
  }
  const std::pair<RunReport, const json*>* with_device = nullptr;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const RunReport& shard = shards[i].first;
    const std::string at = "shard " + to_string(*shard.shard);
    auto differs = [&](const std::string& field, const std::string& mine, const std::string& theirs) {
      if (mine != theirs)
        throw ValidationError(at + "." + field,
                              "is \"" + mine + "\" but shard 1/" + std::to_string(count) + "'s is \"" +
                                  theirs + "\": the shards of a run measure one commit",
                              "inconsistent");
    };
    if (shard.shard->index != static_cast<std::int64_t>(i))
      throw ValidationError(at, "appears twice, and shard " + std::to_string(i + 1) + " is missing",
                            "duplicate");
    if (shard.shard->count != count)
      differs("shard", std::to_string(shard.shard->count), std::to_string(count));
    differs("project", shard.project, first.project);
    differs("commit", shard.commit, first.commit);
    differs("branch", shard.branch, first.branch);
    differs("base_commit", shard.base_commit.value_or("none"), first.base_commit.value_or("none"));
    if (!shard.device) continue;
    if (with_device == nullptr) {
      with_device = &shards[i];
    } else if (shard.device->name != with_device->first.device->name) {
      throw ValidationError(at + ".device.name",
                            "is \"" + shard.device->name + "\" but another shard's is \"" +
                                with_device->first.device->name + "\": a run is measured on one GPU model",
                            "inconsistent");
    }
  }
  return with_device == nullptr ? nullptr : with_device->second;
}

json shard_origin(const RunReport& shard, std::size_t cases) {
  json origin{{"index", shard.shard->index + 1},
              {"agent", shard.agent.name},
              {"cases", cases},
              {"started_at", shard.started_at},
              {"finished_at", shard.finished_at}};
  if (!shard.agent.host.empty()) origin["host"] = shard.agent.host;
  if (shard.job_id) origin["job_id"] = *shard.job_id;
  if (shard.device && !shard.device->uuid.empty()) origin["gpu_uuid"] = shard.device->uuid;
  return origin;
}

}  // namespace

json merge_shard_reports(const std::vector<json>& reports) {
  std::vector<json> copies = reports;
  return merge_shards(std::move(copies)).document;
}

MergedShards merge_shards(std::vector<json>&& reports) {
  const Shards shards = parse_shards(reports);
  const json* with_device = check_one_job(shards);
  json merged = json::object();  // the first shard's fields, its cases apart
  for (const auto& [key, value] : shards.front().second->items())
    if (key != "cases") merged[key] = value;
  merged.erase("shard");
  merged.erase("job_id");  // the job they were split from is the run's
  if (with_device != nullptr) merged["device"] = (*with_device)["device"];
  json cases = json::array(), origins = json::array();
  // Where each case is in `cases`, and the shard that measured it (-1: none
  // yet). A harness whose preflight runs whole in every shard (Google
  // Benchmark, NVBench) reports its cases' checks from each: one entry is
  // kept, the measured one's where a shard measured it.
  std::map<std::string, std::pair<std::size_t, std::int64_t>> seen;
  std::map<std::string, std::vector<std::pair<std::int64_t, const json*>>> stages;
  // A case's checks are the conjunction of every shard's: one shard's failed
  // correctness check fails the case, whichever shard measured it.
  std::map<std::string, json> failed_checks;
  double gpu_seconds = 0;
  for (const auto& [shard, document] : shards) {
    json& shard_cases = const_cast<json&>(*document)["cases"];  // `reports` is ours to take from
    const std::size_t shard_case_count = shard_cases.size();
    for (json& c : shard_cases) {
      const std::string name = c["name"];
      if (auto check = c.find("correctness");
          check != c.end() && check->is_object() && !check->value("passed", true))
        failed_checks.emplace(name, *check);
      const bool measured =
          !c.value("measurements", json::array()).empty() || c.value("identical_to_base", false);
      auto [it, fresh] = seen.emplace(name, std::pair{cases.size(), measured ? shard.shard->index : -1});
      if (fresh) {
        cases.push_back(std::move(c));
        continue;
      }
      if (!measured) continue;
      if (it->second.second >= 0) {
        throw ValidationError("shard " + to_string(*shard.shard) + ".cases",
                              "case \"" + name + "\" is also measured by shard " +
                                  std::to_string(it->second.second + 1) + ": a case is measured by one shard",
                              "duplicate");
      }
      cases[it->second.first] = std::move(c);
      it->second.second = shard.shard->index;
    }
    shard_cases = json::array();
    for (const json& stage : (*document)["stages"])
      stages[stage["name"]].emplace_back(shard.shard->index, &stage);
    gpu_seconds += shard.gpu_seconds;
    if (seconds_at(shard.started_at) < seconds_at(merged["started_at"]))
      merged["started_at"] = shard.started_at;
    if (seconds_at(shard.finished_at) > seconds_at(merged["finished_at"]))
      merged["finished_at"] = shard.finished_at;
    origins.push_back(shard_origin(shard, shard_case_count));
  }
  for (auto& [name, check] : failed_checks) cases[seen.at(name).first]["correctness"] = std::move(check);
  json merged_stages = json::array();
  for (const StageRow& row : kStageTable) {
    if (auto it = stages.find(std::string(row.text)); it != stages.end())
      merged_stages.push_back(merge_stage(it->second));
  }
  merged["stages"] = std::move(merged_stages);
  merged["cases"] = std::move(cases);
  merged["gpu_seconds"] = gpu_seconds;
  merged["shards"] = std::move(origins);
  RunReport parsed = parse_run_report(merged);  // what the merge made keeps the contract too
  return {std::move(merged), std::move(parsed)};
}

}  // namespace kw::common
