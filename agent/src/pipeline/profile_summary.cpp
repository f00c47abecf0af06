#include "pipeline/profile_summary.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace kw::agent {

namespace {

using nlohmann::json;

// One CSV record: quoted fields (a doubled quote inside is a quote).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(field);
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  fields.push_back(field);
  return fields;
}

// ncu prints numbers with thousands separators ("1,234.5").
std::optional<double> number(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), ','), text.end());
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return std::nullopt;
  return value;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

constexpr const char* kStallPrefix = "smsp__average_warps_issue_stalled_";
constexpr const char* kStallSuffix = "_per_issue_active.ratio";

std::string fixed(const json& value, int digits) {
  if (!value.is_number()) return "–";
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", digits, value.get<double>());
  return text;
}

// The kernel of `kernels` with the most time over its launches; empty: none.
std::string longest_kernel(const json& kernels) {
  std::string longest;
  double most = -1;
  for (const auto& [name, k] : kernels.items()) {
    const double total =
        k["time_us"].is_number() ? k["time_us"].get<double>() * k["launches"].get<double>() : 0;
    if (total > most) {
      most = total;
      longest = name;
    }
  }
  return longest;
}

}  // namespace

std::string ncu_csv_of(const std::string& output) {
  std::istringstream lines(output);
  std::string csv;
  bool in_table = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("\"ID\",", 0) == 0) in_table = true;
    if (in_table && !line.empty() && line.front() == '"') csv += line + "\n";
  }
  return csv;
}

namespace {

// The warp-stall columns: (column, reason).
std::vector<std::pair<std::size_t, std::string>> stall_columns(const std::vector<std::string>& header) {
  const std::size_t prefix = std::string(kStallPrefix).size(), suffix = std::string(kStallSuffix).size();
  std::vector<std::pair<std::size_t, std::string>> stalls;
  for (std::size_t i = 0; i < header.size(); ++i) {
    const std::string& name = header[i];
    if (name.rfind(kStallPrefix, 0) != 0 || name.size() <= prefix + suffix ||
        name.compare(name.size() - suffix, std::string::npos, kStallSuffix) != 0)
      continue;
    stalls.emplace_back(i, name.substr(prefix, name.size() - prefix - suffix));
  }
  return stalls;
}

// One kernel's medians over its launches, and its three largest stalls.
json kernel_summary(const std::map<std::string, std::vector<double>>& metrics) {
  json k{{"launches", metrics.count("time_us") ? metrics.at("time_us").size() : 0}};
  for (const char* key : {"time_us", "sm_pct", "memory_pct", "occupancy_pct"})
    k[key] = metrics.count(key) ? json(median(metrics.at(key))) : json(nullptr);
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [key, values] : metrics) {
    if (key.rfind("stall:", 0) == 0) ranked.emplace_back(median(values), key.substr(6));
  }
  std::sort(ranked.rbegin(), ranked.rend());
  k["stalls"] = json::array();
  for (std::size_t i = 0; i < ranked.size() && i < 3; ++i)
    k["stalls"].push_back({{"reason", ranked[i].second}, {"cycles_per_issue", ranked[i].first}});
  return k;
}

}  // namespace

json summarize_ncu_csv(const std::string& csv) {
  std::istringstream lines(csv);
  std::string line;
  if (!std::getline(lines, line)) return json::object();
  const std::vector<std::string> header = csv_fields(line);
  auto column = [&](const std::string& name) -> std::size_t {
    const auto at = std::find(header.begin(), header.end(), name);
    if (at == header.end()) throw std::runtime_error("ncu's CSV has no column " + name);
    return static_cast<std::size_t>(at - header.begin());
  };
  const std::size_t kernel = column("Kernel Name"), time = column("gpu__time_duration.sum"),
                    sm = column("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                    memory = column("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
                    occupancy = column("sm__warps_active.avg.pct_of_peak_sustained_active");
  const auto stalls = stall_columns(header);
  // The units row: ns (as recorded on the H100), or a scaled unit.
  double time_to_us = 1e-3;
  std::map<std::string, std::map<std::string, std::vector<double>>> by_kernel;
  for (bool units = true; std::getline(lines, line); units = false) {
    const std::vector<std::string> fields = csv_fields(line);
    if (fields.size() != header.size()) continue;
    if (units) {
      const std::string& unit = fields[time];
      time_to_us = unit == "us" || unit == "usecond"   ? 1
                   : unit == "ms" || unit == "msecond" ? 1e3
                   : unit == "s" || unit == "second"   ? 1e6
                                                       : 1e-3;
      if (!number(fields[time])) continue;  // a units row, not a launch
    }
    auto& metrics = by_kernel[fields[kernel]];
    auto add = [&](const std::string& key, std::size_t at, double scale = 1) {
      if (auto value = number(fields[at])) metrics[key].push_back(*value * scale);
    };
    add("time_us", time, time_to_us);
    add("sm_pct", sm);
    add("memory_pct", memory);
    add("occupancy_pct", occupancy);
    for (const auto& [at, reason] : stalls) add("stall:" + reason, at);
  }
  json out = json::object();
  for (const auto& [name, metrics] : by_kernel) out[name] = kernel_summary(metrics);
  return out;
}

std::string profile_markdown(const json& summary) {
  std::string text =
      "### ncu profile of " + summary.value("case", std::string()) + "\n\n" +
      "| kernel | side | launches | time (us) | SM % | memory % | achieved occupancy % | top warp "
      "stalls (cycles per issued instruction) |\n|---|---|---:|---:|---:|---:|---:|---|\n";
  std::vector<std::string> kernels;
  for (const char* side : {"base", "head"}) {
    if (!summary.contains(side)) continue;
    for (const auto& [name, _] : summary[side]["kernels"].items()) {
      if (std::find(kernels.begin(), kernels.end(), name) == kernels.end()) kernels.push_back(name);
    }
  }
  for (const std::string& name : kernels) {
    for (const char* side : {"base", "head"}) {
      if (!summary.contains(side)) continue;
      const json& all = summary[side]["kernels"];
      std::string label = std::string(side) + " " + summary[side].value("commit", std::string()).substr(0, 8);
      text.append("| `").append(name).append("` | ").append(label);
      if (!all.contains(name)) {
        text += " | 0 | not launched | | | | |\n";
        continue;
      }
      const json& k = all[name];
      std::string stalls;
      for (const json& s : k["stalls"]) {
        if (!stalls.empty()) stalls += ", ";
        stalls.append(s["reason"].get<std::string>()).append(" ").append(fixed(s["cycles_per_issue"], 2));
      }
      for (const std::string& cell :
           {std::to_string(k["launches"].get<int>()), fixed(k["time_us"], 1), fixed(k["sm_pct"], 1),
            fixed(k["memory_pct"], 1), fixed(k["occupancy_pct"], 1), stalls})
        text.append(" | ").append(cell);
      text += " |\n";
    }
  }
  return text;
}

std::string profile_headline(const json& summary) {
  const json& head = summary["head"]["kernels"];
  const std::string kernel = longest_kernel(head);
  if (kernel.empty()) return "no kernel profiled";
  const json& k = head[kernel];
  // The base's own kernel where it launched another (a variant swapped in).
  std::string base_kernel;
  if (summary.contains("base"))
    base_kernel =
        summary["base"]["kernels"].contains(kernel) ? kernel : longest_kernel(summary["base"]["kernels"]);
  const json* base = base_kernel.empty() ? nullptr : &summary["base"]["kernels"][base_kernel];
  auto metric = [&](const char* key, int digits) {
    return (base != nullptr ? fixed((*base)[key], digits) + " -> " : std::string()) + fixed(k[key], digits);
  };
  std::string line = "`" + kernel + "`" +
                     (base != nullptr && base_kernel != kernel ? " in place of `" + base_kernel + "`" : "") +
                     ": time " + metric("time_us", 1) + " us, SM " + metric("sm_pct", 1) + "%, memory " +
                     metric("memory_pct", 1) + "%, achieved occupancy " + metric("occupancy_pct", 1) + "%";
  if (!k["stalls"].empty())
    line += ", top stall " + k["stalls"][0]["reason"].get<std::string>() + " " +
            fixed(k["stalls"][0]["cycles_per_issue"], 2);
  return line;
}

}  // namespace kw::agent
