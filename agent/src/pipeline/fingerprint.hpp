// Case fingerprints (docs/detection.md, "Fingerprints"): a digest of what a
// case runs, taken from its launch pass. Two sides of a pull request whose
// case has the same fingerprint run the same code the same way, so the case
// is "unchanged: identical code" without timing it. Anything that cannot be
// fingerprinted leaves the case without one, and it is measured.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/bench_result.hpp"

namespace kw::agent {

struct InjectedLaunches;

// What the launch pass's processes loaded (libkw_inject.so's module and maps
// records, and a python bench's own word on its sources).
struct CodeRecords {
  // Demangled kernel name -> the digests of its code in every module that
  // defines it (one, unless two libraries carry the same kernel).
  std::map<std::string, std::set<std::string>> kernels;
  // Modules whose kernels cannot be told apart (a fat binary, an unreadable
  // cubin): their launches have no code digest.
  std::vector<std::string> opaque_modules;
  std::set<std::string> mapped;                      // files mapped executable
  nlohmann::json python = nlohmann::json::object();  // {"sources": {path: sha256}, "packages": {...}}
  std::vector<std::string> problems;                 // why the records are incomplete
};
CodeRecords code_records(const InjectedLaunches& observed);

// Digests of host code, by file, cached for the agent's life by path, size
// and modification time: disassembly (objdump) with addresses replaced by the
// symbols they name (a read of read-only data by the bytes it reads), and
// named data objects with relocated words zeroed and the checkout's path
// taken out, so that neither a kernel image changing size nor the directory
// the build ran in moves a host digest.
class HostCodeDigests {
 public:
  // The digest, or nullopt with `problem` set (no objdump, not an ELF file).
  // `checkout`: the directory the file was built in, whose path __FILE__
  // and the like hold.
  std::optional<std::string> digest(const std::filesystem::path& file, std::string& problem,
                                    const std::filesystem::path& checkout = {});

 private:
  std::map<std::string, std::string> cache_;
};

// nvcc names a translation unit's anonymous namespace
// _GLOBAL__N__<8 hex>_..., the hex from the source file's path: taken out,
// so that a base built in another checkout has the same symbols.
void strip_path_hashes(std::string& text);

// What every case of one side's launch pass shares.
struct FingerprintContext {
  std::filesystem::path checkout;
  std::string harness;                  // "kwbench", "Google Benchmark", ...
  std::vector<std::string> bench_args;  // kernelwatch.json benches[].args
  nlohmann::json device;                // the bench's device block
  CodeRecords code;
};

// A case's fingerprint from the launches it made (all the pass's launches
// where the harness cannot tell cases apart):
//   {"digest": SHA256, "parts": {"kernels": {name: digest}, "host": {path: digest},
//    "sources": SHA256 (python), "launches": SHA256, "arguments": SHA256,
//    "environment": SHA256}}
// or {"unknown": "why"} when part of it cannot be taken.
nlohmann::json case_fingerprint(const nlohmann::json& report_case,
                                const std::vector<nlohmann::json>& launches,
                                const FingerprintContext& context, HostCodeDigests& host);

// What differs between two fingerprints, for a person: "the code of kernel
// X", "the host code of build/bench", "its launches", one entry each. Empty
// when equal.
std::vector<std::string> fingerprint_differences(const nlohmann::json& head, const nlohmann::json& base);

// Those differences in one line: the first four, then how many more.
std::string fingerprint_difference(const std::vector<std::string>& found);

// A pull request's timed case's changed_from_base (docs/run-report.md): those
// differences and the base's side, its digest or why it has none.
nlohmann::json changed_from_base(std::vector<std::string> found, const nlohmann::json& base);

// Whether two fingerprints are known and equal.
bool identical_code(const nlohmann::json& head, const nlohmann::json& base);

// The fingerprints of one bench on one side: per case where its harness
// tells the cases' launches apart (kwbench, python), else one for the whole
// pass (Google Benchmark, NVBench).
struct FingerprintSet {
  std::map<std::string, nlohmann::json> cases;
  nlohmann::json whole;  // null when per case
  double seconds = 0;    // of the launch pass that took them
  nlohmann::json of(const std::string& name) const;
};

// The launch pass's records as fingerprints: into each case's JSON
// ("fingerprint") where the result has cases with their launches, else into
// details.fingerprint. A python bench's own word on its sources
// (details.code) is taken out of the details.
void attach_fingerprints(BenchResult& result, const InjectedLaunches& observed, FingerprintContext context);
FingerprintSet fingerprints_of(const BenchResult& result);

// A commit's fingerprints, kept in `dir` under `key` (what they depend on
// besides the commit: the bench's configuration, the GPU, the driver, kw):
// a pull request on a base already seen takes them instead of a launch
// pass. Only sets whose every case is known are kept.
std::optional<FingerprintSet> cached_fingerprints(const std::filesystem::path& dir, const std::string& key);
void keep_fingerprints(const std::filesystem::path& dir, const std::string& key, const FingerprintSet& set);

// The agent's host code digests (one cache for every job it runs).
HostCodeDigests& host_code_digests();

}  // namespace kw::agent
