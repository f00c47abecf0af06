// A stored run as clients read it, acknowledge it and compare commits, over
// a RunStore: the transactions and access checks of the run routes (storing
// a run is IngestService's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "service/run_store.hpp"

namespace kw::server {

struct Acknowledgement {
  std::string head;                      // the run's head as GET /api/v1/runs/{id} starts it
  std::vector<std::int64_t> carried_to;  // regressions of the same change it covers too
};

// A run its caller may read, as head() found it. The parts of its page take
// it, so no part of a run is read without that access check.
class ReadableRun {
 public:
  std::int64_t id() const { return id_; }

 private:
  friend class RunService;
  explicit ReadableRun(std::int64_t id) : id_(id) {}
  std::int64_t id_;
};

struct CheckedRunHead {
  ReadableRun run;
  RunHead head;
};

class RunService {
 public:
  explicit RunService(RunStore& store) : store_(store) {}

  // The run's head (verdict, stages, counts) for `page`, once the caller
  // may read it.
  CheckedRunHead head(const Caller* caller, std::int64_t run_id, const Page& page);
  // Cases [first, end) of the run: their comparisons or themselves, as a JSON array.
  std::string comparisons(const ReadableRun& run, std::int64_t first, std::int64_t end);
  std::string cases(const ReadableRun& run, std::int64_t first, std::int64_t end);
  // What changed in a flagged case's launches and build ("" case: the run's worst).
  nlohmann::json explanation(const Caller* caller, std::int64_t run_id, const std::string& case_name);
  // A regression accepted as intended, carried to the runs of the same change
  // it covers, each announced again. Conflict ("not_a_regression") for
  // another verdict.
  Acknowledgement acknowledge(const Caller& caller, std::int64_t run_id, const std::string& reason);

  // `project` nullopt: the one the caller's token reaches, or every project
  // for a caller who may read them all. `base_text` and `head_text`: a commit,
  // 7 or more of its first hex digits, or a branch (its newest measured commit).
  nlohmann::json compare(const Caller* caller, const std::optional<std::string>& project,
                         const std::string& base_text, const std::string& head_text, const CaseFilter& filter,
                         const Page& page);

 private:
  RunStore& store_;
};

}  // namespace kw::server
