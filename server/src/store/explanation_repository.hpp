// Why a flagged case got slower (or faster): what its run launched against
// what its baseline run launched, kernel by kernel (grid, block, registers,
// shared memory, theoretical occupancy on each run's GPU), and the build's
// per-kernel resources (registers, shared memory, spills) of those kernels.
// Everything comes from the two stored reports; nothing is measured again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

namespace kw::server {

class ExplanationRepository {
 public:
  // {"run_id", "cases": [...]} for the run's candidate comparisons flagged
  // `regression` or `improvement`, or for the one case named whatever its
  // status; nullopt: no such run.
  static std::optional<nlohmann::json> explain(pqxx::work& tx, std::int64_t run_id,
                                               const std::string& case_name = {});
};

}  // namespace kw::server
