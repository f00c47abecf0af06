#include "pipeline/load_check.hpp"

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "kw/common/demangle.hpp"
#include "kw/common/subprocess.hpp"

namespace kw::agent {

namespace fs = std::filesystem;

namespace {

void add_unique(std::vector<std::string>& list, const std::string& value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(value);
}

std::string joined(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& item : list) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "none" : out;
}

// "sm_90a" -> {90, true}.
std::pair<int, bool> arch_of(const std::string& name) {
  const bool specific = name.back() == 'a' || name.back() == 'f';
  return {std::stoi(name.substr(3)), specific};
}

}  // namespace

KernelImages parse_image_lists(const std::string& elf_list, const std::string& ptx_list) {
  // "ELF file    1: bench.1.sm_90.cubin", "PTX file    1: bench.1.sm_90.ptx"
  static const std::regex arch(R"(\.(sm_[0-9]+[af]?)\.(cubin|ptx)\s*$)");
  KernelImages images;
  for (auto [text, list] : {std::pair{&elf_list, &images.sass}, {&ptx_list, &images.ptx}}) {
    std::istringstream lines(*text);
    for (std::string line; std::getline(lines, line);) {
      std::smatch match;
      if (std::regex_search(line, match, arch)) add_unique(*list, match[1]);
    }
  }
  return images;
}

std::string image_problem(const KernelImages& images, const std::string& capability) {
  const auto dot = capability.find('.');
  if (dot == std::string::npos) return "unknown compute capability \"" + capability + "\"";
  const int major = std::stoi(capability.substr(0, dot)), minor = std::stoi(capability.substr(dot + 1));
  const int device = major * 10 + minor;
  for (const std::string& sass : images.sass) {
    auto [version, specific] = arch_of(sass);
    if (specific ? version == device : version / 10 == major && version % 10 <= minor) return {};
  }
  for (const std::string& ptx : images.ptx) {
    auto [version, specific] = arch_of(ptx);
    if (specific ? version == device : version <= device) return {};
  }
  return "no kernel image for sm_" + std::to_string(device) + " (compute capability " + capability +
         "): it has SASS for " + joined(images.sass) + " and PTX for " + joined(images.ptx);
}

std::vector<std::string> resource_problems(const std::string& resource_usage) {
  // " Function _Z6kernelPf:" then "  REG:32 STACK:0 SHARED:0 LOCAL:0 ..." (on
  // the same line in older cuobjdumps).
  static const std::regex function(R"(Function ([^\s:]+):)");
  static const std::regex registers(R"(REG:([0-9]+))");
  static const std::regex shared(R"(SHARED:([0-9]+))");
  constexpr long kMaxRegisters = 255, kMaxStaticShared = 48L * 1024;
  std::vector<std::string> problems;
  std::istringstream lines(resource_usage);
  std::string name;
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, function)) name = match[1];
    if (name.empty()) continue;
    if (std::regex_search(line, match, registers) && std::stol(match[1]) > kMaxRegisters) {
      add_unique(problems, common::demangle(name.c_str()) + ": " + match[1].str() +
                               " registers per thread, at most " + std::to_string(kMaxRegisters));
    }
    if (std::regex_search(line, match, shared) && std::stol(match[1]) > kMaxStaticShared) {
      add_unique(problems, common::demangle(name.c_str()) + ": " + match[1].str() +
                               " bytes of static shared memory, at most " + std::to_string(kMaxStaticShared));
    }
  }
  return problems;
}

fs::path find_cuda_tool(const std::string& name) {
  std::vector<fs::path> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::istringstream split(path);
    for (std::string dir; std::getline(split, dir, ':');)
      if (!dir.empty()) dirs.emplace_back(dir);
  }
  if (const char* cuda = std::getenv("CUDA_HOME")) dirs.push_back(fs::path(cuda) / "bin");
  dirs.emplace_back("/usr/local/cuda/bin");
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    if (fs::is_regular_file(dir / name, ec)) return dir / name;
  }
  return {};
}

std::vector<fs::path> files_with_device_code(const fs::path& bench, const fs::path& root) {
  std::vector<fs::path> files{bench};
  common::ChildSpec spec;
  spec.argv = {"ldd", bench.string()};
  spec.timeout_s = 30;
  spec.tail_bytes = std::size_t{256} * 1024;
  common::ChildOutcome outcome = common::run_child(spec);
  if (!outcome.ok()) return files;  // a static executable, or not one at all: the bench alone
  std::error_code ec;
  const std::string inside = fs::weakly_canonical(root, ec).string() + "/";
  // "\tlibkw_attention.so => /repo/build/libkw_attention.so (0x...)"
  static const std::regex resolved(R"(=>\s+(/\S+)\s+\(0x)");
  std::istringstream lines(outcome.output_tail);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (!std::regex_search(line, match, resolved)) continue;
    fs::path library = fs::weakly_canonical(match[1].str(), ec);
    if (library.string().rfind(inside, 0) == 0) files.push_back(library);
  }
  return files;
}

}  // namespace kw::agent
