#include "store/explanation_repository.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kw/common/demangle.hpp"
#include "kw/common/occupancy.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

// The flagged candidate comparisons (or the one case $2 names, whatever its
// status), largest change first, with what each was compared with. A case
// flagged in energy alone is explained too, by its time row.
// A pull request measured A/B has its base's times but not its launches: the
// newest stored run of base_commit on the same GPU model has them.
constexpr const char* kFlagged = R"sql(
SELECT x.case_name, x.status, x.ratio,
       COALESCE(x.baseline_run_id,
                (SELECT b.id FROM runs r JOIN runs b ON b.project_id = r.project_id AND b.commit_sha = r.base_commit
                   AND b.gpu_model = r.gpu_model
                 WHERE r.id = x.run_id ORDER BY b.id DESC LIMIT 1))
FROM comparisons x JOIN cases c ON c.run_id = x.run_id AND c.name = x.case_name
WHERE x.run_id = $1 AND x.impl = 'candidate' AND x.kind = 'time'
  AND CASE WHEN $2 = '' THEN EXISTS (SELECT 1 FROM comparisons f
                                     WHERE f.run_id = x.run_id AND f.case_name = x.case_name
                                       AND f.impl = 'candidate' AND f.status IN ('regression', 'improvement'))
      ELSE x.case_name = $2 END
ORDER BY abs(ln(COALESCE(x.ratio, 1))) DESC, c.ordinal
)sql";

// A run's GPU, commit and build table (ptxas -v, per mangled kernel name).
constexpr const char* kRunFacts = R"sql(
SELECT r.id, r.commit_sha, r.gpu_model, COALESCE(r.device->>'compute_capability', ''),
       COALESCE((SELECT s.details->'kernels' FROM stages s WHERE s.run_id = r.id AND s.name = 'build'), '[]')::text
FROM runs r WHERE r.id = $1
)sql";

constexpr const char* kLaunches = R"sql(
SELECT l.kernel, l.grid::text, l.block::text, l.registers, l.static_smem, l.dynamic_smem
FROM launches l JOIN cases c ON c.id = l.case_id
WHERE c.run_id = $1 AND c.name = $2
ORDER BY l.ordinal
)sql";

struct Launch {
  std::string kernel;
  std::vector<std::int64_t> grid, block;
  int registers = 0;
  std::int64_t shared = 0;  // static + dynamic, per block

  std::int64_t threads() const {
    std::int64_t n = 1;
    for (std::int64_t d : block) n *= d;
    return n;
  }
  bool operator<(const Launch& o) const {
    return std::tie(kernel, grid, block, registers, shared) <
           std::tie(o.kernel, o.grid, o.block, o.registers, o.shared);
  }
  bool operator==(const Launch& o) const { return !(*this < o) && !(o < *this); }
};

std::vector<std::int64_t> int_array(const std::string& text) {
  std::vector<std::int64_t> out;
  std::string digits;
  for (char c : text) {
    if ((c >= '0' && c <= '9') || c == '-') {
      digits += c;
    } else if (!digits.empty()) {
      out.push_back(std::stoll(digits));
      digits.clear();
    }
  }
  if (!digits.empty()) out.push_back(std::stoll(digits));
  return out;
}

struct Side {
  std::int64_t run_id = 0;
  std::string commit, gpu_model, compute_capability;
  json build = json::array();
  std::vector<Launch> launches;  // distinct configurations, in launch order
};

// A run's facts are read once however many of its cases are explained.
using RunFacts = std::map<std::int64_t, std::optional<Side>>;

std::optional<Side> load_side(pqxx::work& tx, RunFacts& known, std::int64_t run_id,
                              const std::string& case_name) {
  auto [it, fresh] = known.try_emplace(run_id);
  if (fresh) {
    pqxx::result facts = tx.exec_params(kRunFacts, run_id);
    if (!facts.empty()) {
      Side& side = it->second.emplace();
      side.run_id = run_id;
      side.commit = facts[0][1].as<std::string>();
      side.gpu_model = facts[0][2].as<std::string>();
      side.compute_capability = facts[0][3].as<std::string>();
      // Runs stored before their build details were checked may hold any
      // shape: what is not a table of kernel rows is no table.
      json build = json::parse(facts[0][4].as<std::string>(), nullptr, false);
      if (build.is_array()) {
        for (json& row : build) {
          if (row.is_object() && row.contains("name") && row["name"].is_string())
            side.build.push_back(std::move(row));
        }
      }
    }
  }
  if (!it->second) return std::nullopt;
  Side side = *it->second;
  std::set<Launch> seen;
  for (const auto& row : tx.exec_params(kLaunches, run_id, case_name)) {
    Launch launch{row[0].as<std::string>(), int_array(row[1].as<std::string>()),
                  int_array(row[2].as<std::string>()), row[3].as<int>(),
                  row[4].as<std::int64_t>() + row[5].as<std::int64_t>()};
    if (seen.insert(launch).second) side.launches.push_back(std::move(launch));
  }
  return side;
}

std::string dims(const std::vector<std::int64_t>& d) {
  std::string out;
  for (std::int64_t v : d) out += (out.empty() ? "" : "×") + std::to_string(v);
  return out;
}

std::string kilobytes(std::int64_t bytes) {
  if (bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KB";
  return std::to_string(bytes) + " bytes";
}

std::string percent(double fraction) {
  return std::to_string(static_cast<int>(std::lround(100 * fraction))) + "%";
}

json launch_json(const Launch& launch, const Side& side) {
  json out{{"kernel", launch.kernel},     {"grid", launch.grid},           {"block", launch.block},
           {"threads", launch.threads()}, {"registers", launch.registers}, {"shared_bytes", launch.shared}};
  if (auto sm = common::sm_limits(side.compute_capability)) {
    common::Occupancy o =
        common::theoretical_occupancy(*sm, launch.threads(), launch.registers, launch.shared);
    out["occupancy"] = {{"blocks_per_sm", o.blocks_per_sm},
                        {"warps_per_sm", o.warps_per_sm},
                        {"fraction", o.fraction},
                        {"limited_by", o.limited_by}};
  }
  return out;
}

// The build table's row of a launched kernel: ptxas names it mangled, the
// launch record demangled; a signature's parameters may differ in spelling,
// so the name up to its parameter list is enough.
const json* build_row(const json& build, const std::string& kernel) {
  auto stem = [](const std::string& name) { return name.substr(0, name.find('(')); };
  for (const json& row : build) {
    std::string name = common::demangle(row["name"].get_ref<const std::string&>().c_str());
    if (name == kernel || stem(name) == stem(kernel)) return &row;
  }
  return nullptr;
}

// A byte count of a build row; anything but a non-negative integer is absent.
std::int64_t count_of(const json& row, const char* key) {
  const auto value = row.find(key);
  if (value == row.end() || !value->is_number_integer()) return 0;
  return std::max<std::int64_t>(0, value->get<std::int64_t>());
}

// What a reader should see first: each difference as one line.
std::vector<std::string> changes(const Side& base, const Side& head) {
  std::vector<std::string> lines;
  std::set<std::string> base_kernels, head_kernels;
  for (const Launch& l : base.launches) base_kernels.insert(l.kernel);
  for (const Launch& l : head.launches) head_kernels.insert(l.kernel);
  for (const std::string& k : head_kernels) {
    if (!base_kernels.contains(k)) lines.push_back("launches " + k + ", which the base did not");
  }
  for (const std::string& k : base_kernels) {
    if (!head_kernels.contains(k)) lines.push_back("no longer launches " + k);
  }
  // Launch by launch where both launch the same number of configurations,
  // else the first of each: a swapped variant is the common case.
  const std::size_t pairs =
      base.launches.size() == head.launches.size()
          ? head.launches.size()
          : std::min<std::size_t>(1, std::min(base.launches.size(), head.launches.size()));
  auto sm_base = common::sm_limits(base.compute_capability),
       sm_head = common::sm_limits(head.compute_capability);
  for (std::size_t i = 0; i < pairs; ++i) {
    const Launch& b = base.launches[i];
    const Launch& h = head.launches[i];
    const std::string which = pairs > 1 ? " (launch " + std::to_string(i + 1) + ")" : "";
    if (b.block != h.block)
      lines.push_back("block " + dims(b.block) + " → " + dims(h.block) + " (" + std::to_string(b.threads()) +
                      " → " + std::to_string(h.threads()) + " threads)" + which);
    if (b.grid != h.grid) lines.push_back("grid " + dims(b.grid) + " → " + dims(h.grid) + which);
    if (b.registers != h.registers)
      lines.push_back("registers " + std::to_string(b.registers) + " → " + std::to_string(h.registers) +
                      " per thread" + which);
    if (b.shared != h.shared)
      lines.push_back("shared memory " + kilobytes(b.shared) + " → " + kilobytes(h.shared) + " per block" +
                      which);
    if (sm_base && sm_head) {
      common::Occupancy ob = common::theoretical_occupancy(*sm_base, b.threads(), b.registers, b.shared);
      common::Occupancy oh = common::theoretical_occupancy(*sm_head, h.threads(), h.registers, h.shared);
      // Said whenever the launch changed: "unchanged" is an answer too.
      const std::string blocks = " (" + std::to_string(ob.blocks_per_sm) + " → " +
                                 std::to_string(oh.blocks_per_sm) + " blocks per SM, limited by " +
                                 oh.limited_by + ")" + which;
      if (ob.warps_per_sm != oh.warps_per_sm)
        lines.push_back("theoretical occupancy " + percent(ob.fraction) + " → " + percent(oh.fraction) +
                        blocks);
      else if (b.block != h.block || b.registers != h.registers || b.shared != h.shared)
        lines.push_back("theoretical occupancy unchanged at " + percent(oh.fraction) + blocks);
    }
  }
  for (const std::string& k : head_kernels) {
    const json* hb = build_row(head.build, k);
    const json* bb = build_row(base.build, k);
    if (hb == nullptr) continue;
    for (const char* key : {"spill_stores", "spill_loads"}) {
      const std::int64_t was = bb ? count_of(*bb, key) : 0, now = count_of(*hb, key);
      if (now != was)
        lines.push_back(std::string(key == std::string("spill_stores") ? "spill stores " : "spill loads ") +
                        std::to_string(was) + " → " + std::to_string(now) + " bytes in " + k);
    }
  }
  if (base.gpu_model != head.gpu_model) lines.push_back("GPU " + base.gpu_model + " → " + head.gpu_model);
  return lines;
}

json side_json(const Side& side) {
  json launches = json::array(), build = json::array();
  std::set<std::string> kernels;
  for (const Launch& l : side.launches) {
    launches.push_back(launch_json(l, side));
    kernels.insert(l.kernel);
  }
  for (const std::string& k : kernels) {
    if (const json* row = build_row(side.build, k)) {
      json entry = *row;
      entry["kernel"] = k;
      build.push_back(std::move(entry));
    }
  }
  return {{"run_id", side.run_id},       {"commit", side.commit},
          {"gpu_model", side.gpu_model}, {"compute_capability", side.compute_capability},
          {"launches", launches},        {"build", build}};
}

}  // namespace

std::optional<json> ExplanationRepository::explain(pqxx::work& tx, std::int64_t run_id,
                                                   const std::string& case_name) {
  if (tx.exec_params("SELECT 1 FROM runs WHERE id = $1", run_id).empty()) return std::nullopt;
  json cases = json::array();
  RunFacts known;
  for (const auto& flagged : tx.exec_params(kFlagged, run_id, case_name)) {
    const std::string name = flagged[0].as<std::string>();
    json entry{{"case", name},
               {"status", flagged[1].as<std::string>()},
               {"ratio", flagged[2].is_null() ? json(nullptr) : json(flagged[2].as<double>())}};
    std::optional<Side> head = load_side(tx, known, run_id, name);
    std::optional<Side> base;
    if (!flagged[3].is_null()) base = load_side(tx, known, flagged[3].as<std::int64_t>(), name);
    entry["head"] = side_json(*head);
    if (!base) {
      entry["base"] = nullptr;
      entry["changes"] = json::array();
      entry["note"] = "no stored run of the baseline on this GPU model to compare launches with";
    } else {
      entry["base"] = side_json(*base);
      entry["changes"] = changes(*base, *head);
      if (base->launches.empty() || head->launches.empty())
        entry["note"] = "launches were not recorded on both sides (the launch_geometry stage records them)";
      else if (entry["changes"].empty())
        entry["note"] =
            "the same kernels, launched the same way, with the same resources: the change is inside "
            "the kernels (a profile tells more)";
    }
    cases.push_back(std::move(entry));
  }
  return json{{"run_id", run_id}, {"cases", cases}};
}

}  // namespace kw::server
