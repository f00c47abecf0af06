#include "process.hpp"

#include "kw/common/subprocess.hpp"

namespace kw::server {

ProcessResult run_process(const std::vector<std::string>& argv, const std::optional<std::string>& run_as) {
  common::ChildSpec spec;
  spec.argv = argv;
  spec.timeout_s = 300;
  spec.tail_bytes = 64 * 1024;
  spec.run_as = run_as.value_or("");
  common::ChildOutcome outcome = common::run_child(spec);
  return {outcome.timed_out ? 124 : outcome.exit_code, outcome.output_tail};
}

}  // namespace kw::server
