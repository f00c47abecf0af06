#include "pipeline/fingerprint.hpp"

#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "kw/common/module_digest.hpp"
#include "kw/common/sha256.hpp"
#include "kw/common/subprocess.hpp"
#include "pipeline/launch_check.hpp"

namespace kw::agent {

namespace fs = std::filesystem;
using nlohmann::json;

CodeRecords code_records(const InjectedLaunches& observed) {
  CodeRecords out;
  for (const json& module : observed.modules) {
    const json& kernels = module.value("kernels", json::object());
    if (kernels.empty() && module.value("format", "") != "cubin") {
      out.opaque_modules.push_back(
          module.value("image", "?") + " (" + module.value("format", "?") +
          (module.contains("problem") ? ": " + module["problem"].get<std::string>() : "") + ")");
      continue;
    }
    for (const auto& [name, digest] : kernels.items()) out.kernels[name].insert(digest.get<std::string>());
  }
  out.mapped = observed.mapped;
  out.problems = observed.problems;
  return out;
}

namespace {

bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

std::string hex_of(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xf];
  }
  return out;
}

}  // namespace

void strip_path_hashes(std::string& text) {
  static constexpr std::string_view kMarker = "_GLOBAL__N__";
  for (std::size_t at = text.find(kMarker); at != std::string::npos; at = text.find(kMarker, at + 1)) {
    const std::size_t id = at + kMarker.size();
    std::size_t end = id;
    while (end < text.size() && is_hex_digit(text[end])) ++end;
    if (end - id == 8 && end < text.size() && text[end] == '_') text.erase(id, 9);
  }
}

namespace {

// How many bytes an instruction reads from memory, from its mnemonic and
// the register it reads into (AT&T syntax, destination last): a scalar float
// 4, a double 8, a vector its register's width, a general register its own.
std::size_t operand_bytes(const std::string& instruction) {
  const std::string mnemonic = instruction.substr(0, instruction.find(' '));
  const std::string into = instruction.substr(instruction.rfind(',') + 1);
  if (mnemonic.find("ss") != std::string::npos) return 4;
  if (mnemonic.find("sd") != std::string::npos) return 8;
  if (into.starts_with("%zmm")) return 64;
  if (into.starts_with("%ymm")) return 32;
  if (into.starts_with("%xmm")) return 16;
  if (into.starts_with("%e") || (into.starts_with("%r") && into.ends_with("d"))) return 4;  // %eax, %r8d
  return 8;
}

// One line of `objdump -d -w --no-show-raw-insn` without what moves with the
// layout: the instruction's address, RIP-relative displacements (the symbol
// they reach stays; a read of read-only data carries the bytes it reads, a
// float constant's value) and the addresses before "<symbol>" in branch
// targets. Empty for a line that says nothing of the code (the file's name).
std::string normalized_line(const std::string& line, const common::HostImage& image) {
  if (line.empty() || line.find("file format") != std::string::npos) return {};
  std::size_t start = 0;
  while (start < line.size() && line[start] == ' ') ++start;
  std::size_t hex_end = start;
  while (hex_end < line.size() && is_hex_digit(line[hex_end])) ++hex_end;
  if (hex_end > start && hex_end + 1 < line.size() && line.compare(hex_end, 2, " <") == 0) {
    std::string label = line.substr(hex_end + 1);  // a function's
    strip_path_hashes(label);
    return label;
  }
  if (hex_end == start || hex_end >= line.size() || line[hex_end] != ':') return line;
  std::string text = line.substr(line.find_first_not_of(":\t ", hex_end));
  std::string comment_symbol;
  std::uint64_t target = 0;
  if (const std::size_t hash = text.find(" # "); hash != std::string::npos) {
    target = std::strtoull(text.c_str() + hash + 3, nullptr, 16);
    // The data a RIP-relative operand reaches, by its symbol alone: the
    // offset past it moves with the strings before it (the checkout's path
    // in __FILE__). What a read takes is added below.
    const std::size_t open = text.find('<', hash);
    if (open != std::string::npos) {
      comment_symbol = text.substr(open);
      if (const std::size_t plus = comment_symbol.find("+0x"); plus != std::string::npos)
        comment_symbol = comment_symbol.substr(0, plus) + ">";
    }
    text.erase(hash);
  }
  if (const std::size_t rip = text.find("(%rip)"); rip != std::string::npos) {
    std::size_t from = rip;
    while (from > 0 && (is_hex_digit(text[from - 1]) || text[from - 1] == 'x' || text[from - 1] == '-'))
      --from;
    text.replace(from, rip - from, comment_symbol);
    if (!text.starts_with("lea")) {
      if (const std::string_view read = image.rodata_at(target, operand_bytes(text)); !read.empty())
        text += " =" + hex_of(read);
    }
  }
  // "call 1234 <f>" -> "call <f>"
  for (std::size_t open = text.find(" <"); open != std::string::npos; open = text.find(" <", open + 2)) {
    std::size_t from = open;
    while (from > 0 && is_hex_digit(text[from - 1])) --from;
    if (from < open && (from == 0 || text[from - 1] == ' ' || text[from - 1] == ',')) {
      text.erase(from, open + 1 - from);
      open = from;
    }
  }
  std::string collapsed;
  for (char c : text) {
    if ((c == ' ' || c == '\t') && (collapsed.empty() || collapsed.back() == ' ')) continue;
    collapsed += c == '\t' ? ' ' : c;
  }
  strip_path_hashes(collapsed);
  return collapsed;
}

std::string canonical_digest(const json& value) {
  return common::sha256_hex(value.dump());
}

}  // namespace

std::optional<std::string> HostCodeDigests::digest(const fs::path& file, std::string& problem,
                                                   const fs::path& checkout) {
  static std::mutex mutex;  // a kw agent's jobs may share the cache
  std::lock_guard lock(mutex);
  struct stat info {};
  if (stat(file.c_str(), &info) != 0) {
    problem = file.string() + ": cannot be read";
    return std::nullopt;
  }
  const std::string root = checkout.empty() ? std::string() : fs::weakly_canonical(checkout).string();
  const std::string key = file.string() + "\n" + root + "\n" + std::to_string(info.st_size) + "\n" +
                          std::to_string(info.st_mtim.tv_sec) + "." + std::to_string(info.st_mtim.tv_nsec);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  std::unique_ptr<common::HostImage> image;
  try {
    std::ifstream in(file, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    image = std::make_unique<common::HostImage>(bytes.str());
  } catch (const std::exception& error) {
    problem = file.string() + ": " + error.what();
    return std::nullopt;
  }
  common::Sha256 code;
  std::size_t lines = 0;
  common::ChildSpec spec;
  spec.argv = {"objdump", "-d", "-w", "--no-show-raw-insn", file.string()};
  spec.timeout_s = 300;
  spec.on_line = [&](const std::string& line) {
    const std::string normalized = normalized_line(line, *image);
    if (normalized.empty()) return;
    code.update(normalized).update("\n");
    ++lines;
  };
  static const std::atomic<bool> never{false};
  const common::ChildOutcome outcome = common::run_child(spec, never);
  if (!outcome.ok() || lines == 0) {
    problem = file.string() + ": objdump " + outcome.describe() + (lines == 0 ? ", no code" : "");
    return std::nullopt;
  }
  std::string digest = common::sha256_hex(code.hex() + image->objects_digest(root, strip_path_hashes));
  cache_[key] = digest;
  return digest;
}

json case_fingerprint(const json& report_case, const std::vector<json>& launches,
                      const FingerprintContext& context, HostCodeDigests& host) {
  auto unknown = [](const std::string& why) { return json{{"unknown", why}}; };
  if (!context.code.problems.empty()) return unknown(context.code.problems.front());
  if (launches.empty()) return unknown("no launches observed");
  json parts;
  parts["kernels"] = json::object();
  json geometry = json::array();
  for (const json& launch : launches) {
    const std::string kernel = launch.value("kernel", "");
    auto it = context.code.kernels.find(kernel);
    if (it == context.code.kernels.end()) {
      return unknown("the code of " + kernel + " was not seen loaded" +
                     (context.code.opaque_modules.empty()
                          ? std::string()
                          : " (a module whose kernels cannot be told apart: " +
                                context.code.opaque_modules.front() + ")"));
    }
    std::string digests;
    for (const std::string& digest : it->second) digests += (digests.empty() ? "" : "+") + digest;
    parts["kernels"][kernel] = digests;
    geometry.push_back({launch.value("kernel", ""), launch.value("grid", json()),
                        launch.value("block", json()), launch.value("registers", json()),
                        launch.value("static_smem", json()), launch.value("dynamic_smem", json())});
  }
  // A case launches the same kernels the same way in the same order; their
  // count is part of it (a loop that runs twice as often).
  parts["launches"] = canonical_digest(geometry);
  parts["host"] = json::object();
  const fs::path root = fs::weakly_canonical(context.checkout);
  for (const std::string& file : context.code.mapped) {
    const fs::path path(file);
    const fs::path relative = path.lexically_relative(root);
    // The toolkit's, the driver's, the interpreter's, torch's: they count by
    // the code of the kernels they launch and by the versions in the
    // environment.
    if (relative.empty() || *relative.begin() == "..") continue;
    std::string problem;
    auto digest = host.digest(path, problem, root);
    if (!digest) return unknown("host code: " + problem);
    parts["host"][relative.generic_string()] = *digest;
  }
  // One digest for them all: a python bench imports the same sources for
  // every case, and a report holds a thousand cases.
  if (const json& sources = context.code.python.value("sources", json::object()); !sources.empty())
    parts["sources"] = canonical_digest(sources);
  parts["arguments"] = canonical_digest(json{{"bench", context.bench_args},
                                             {"case", report_case.value("name", "")},
                                             {"params", report_case.value("params", json::object())}});
  const json& device = context.device.is_object() ? context.device : json::object();
  parts["environment"] =
      canonical_digest(json{{"harness", context.harness},
                            {"packages", context.code.python.value("packages", json::object())},
                            {"gpu", device.value("name", "")},
                            {"compute_capability", device.value("compute_capability", "")},
                            {"driver", device.value("driver", "")},
                            {"cuda_runtime", device.value("cuda_runtime", "")}});
  return {{"digest", canonical_digest(parts)}, {"parts", parts}};
}

bool identical_code(const json& head, const json& base) {
  return head.is_object() && base.is_object() && head.contains("digest") && base.contains("digest") &&
         head["digest"] == base["digest"];
}

std::vector<std::string> fingerprint_differences(const json& head, const json& base) {
  if (identical_code(head, base)) return {};
  auto why_none = [](const json& side) { return side.is_object() ? side.value("unknown", "none") : "none"; };
  if (!head.is_object() || !head.contains("parts")) return {"the head has no fingerprint: " + why_none(head)};
  if (!base.is_object() || !base.contains("parts")) return {"the base has no fingerprint: " + why_none(base)};
  const json& h = head["parts"];
  const json& b = base["parts"];
  std::vector<std::string> found;
  auto named = [&](const char* part, const std::string& what) {
    const json& hp = h.value(part, json::object());
    const json& bp = b.value(part, json::object());
    for (const auto& [name, digest] : hp.items()) {
      if (!bp.contains(name))
        found.push_back(what + " " + name + " (new)");
      else if (bp[name] != digest)
        found.push_back(what + " " + name);
    }
    for (const auto& [name, _] : bp.items()) {
      if (!hp.contains(name)) found.push_back(what + " " + name + " (gone)");
    }
  };
  named("kernels", "the code of kernel");
  named("host", "the host code of");
  for (const char* part : {"sources", "launches", "arguments", "environment"}) {
    if (h.value(part, json()) != b.value(part, json()))
      found.push_back(std::string(part == std::string("sources") ? "its Python " : "its ") + part);
  }
  if (found.empty()) found.push_back("its fingerprint");
  return found;
}

std::string fingerprint_difference(const std::vector<std::string>& found) {
  std::string out;
  for (std::size_t i = 0; i < found.size() && i < 4; ++i) out += (i ? "; " : "") + found[i];
  if (found.size() > 4) out += "; and " + std::to_string(found.size() - 4) + " more";
  return out;
}

json changed_from_base(std::vector<std::string> found, const json& base) {
  // The report holds a few lines of it (run_report.cpp's limits): the first
  // 63, then how many more.
  constexpr std::size_t kShown = 63;
  if (found.size() > kShown + 1) {
    const std::size_t more = found.size() - kShown;
    found.resize(kShown);
    found.push_back("and " + std::to_string(more) + " more");
  }
  for (std::string& line : found)
    if (line.size() > 1000) line = line.substr(0, 1000) + "...";
  json base_side;
  if (base.is_object() && base.contains("digest"))
    base_side = {{"digest", base["digest"]}};
  else
    base_side = {{"unknown", base.is_object() ? base.value("unknown", "no fingerprint") : "no fingerprint"}};
  return {{"differs", found}, {"base", base_side}};
}

json FingerprintSet::of(const std::string& name) const {
  if (auto it = cases.find(name); it != cases.end()) return it->second;
  return whole;
}

std::optional<FingerprintSet> cached_fingerprints(const fs::path& dir, const std::string& key) {
  std::ifstream in(dir / (key + ".json"));
  if (!in) return std::nullopt;
  try {
    const json kept = json::parse(in);
    FingerprintSet set;
    for (const auto& [name, fingerprint] : kept.at("cases").items()) set.cases[name] = fingerprint;
    set.whole = kept.at("whole");
    return set;
  } catch (const std::exception&) {
    return std::nullopt;  // cut short by a crash: taken again
  }
}

void keep_fingerprints(const fs::path& dir, const std::string& key, const FingerprintSet& set) {
  auto known = [](const json& fingerprint) {
    return fingerprint.is_object() && fingerprint.contains("digest");
  };
  if (set.cases.empty() && !known(set.whole)) return;
  for (const auto& [_, fingerprint] : set.cases) {
    if (!known(fingerprint)) return;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path partial = dir / (key + ".json.partial");
  {
    std::ofstream out(partial);
    out << json{{"cases", set.cases}, {"whole", set.whole}}.dump();
    if (!out) return;
  }
  fs::rename(partial, dir / (key + ".json"), ec);  // whole or not at all
}

HostCodeDigests& host_code_digests() {
  static HostCodeDigests digests;
  return digests;
}

void attach_fingerprints(BenchResult& result, const InjectedLaunches& observed, FingerprintContext context) {
  context.code = code_records(observed);
  if (result.details.is_object() && result.details.contains("code")) {
    if (result.details["code"].is_object()) context.code.python = result.details["code"];
    result.details.erase("code");
  }
  if (context.device.is_null()) context.device = result.device;
  bool per_case = false;
  for (json& c : result.cases) {
    if (!c.contains("launches")) continue;
    per_case = true;
    std::vector<json> launches(c["launches"].begin(), c["launches"].end());
    c["fingerprint"] = case_fingerprint(c, launches, context, host_code_digests());
  }
  if (!per_case) {
    result.details["fingerprint"] =
        case_fingerprint(json{{"name", ""}}, observed.launches, context, host_code_digests());
  }
}

FingerprintSet fingerprints_of(const BenchResult& result) {
  FingerprintSet set;
  set.seconds = result.seconds;
  for (const json& c : result.cases) {
    if (c.contains("fingerprint")) set.cases[c.value("name", "")] = c["fingerprint"];
  }
  if (result.details.is_object() && result.details.contains("fingerprint"))
    set.whole = result.details["fingerprint"];
  if (set.cases.empty() && set.whole.is_null()) {
    // A pass that passed yet fingerprinted nothing recorded no launch.
    const std::string why =
        !find_inject_library()      ? "libkw_inject.so was not found, so no launch was recorded"
        : result.status == "passed" ? "the launch pass recorded no launch"
                                    : "the launch pass " + result.status + ": " + result.message;
    set.whole = {{"unknown", why}};
  }
  return set;
}

}  // namespace kw::agent
