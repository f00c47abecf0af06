// The job store's contract on the in-memory stand-in the queue's rules are
// tested on (job_service_test.cpp).
#include "in_memory_store.hpp"
#include "job_store_contract.hpp"

namespace kw::server::testing {
namespace {

class InMemoryHarness {
 public:
  JobStore& store() { return store_; }

  std::int64_t add_project(const std::string& name, const SettingsChange& change) {
    ProjectSettings settings;
    settings.apply(change);
    return store_.add_project(name, settings);
  }

  void age_jobs(double seconds) { store_.advance(seconds); }

  Caller agent_token(const std::string& name, std::optional<std::vector<std::string>> projects) {
    return Caller{++tokens_, name, Scope::agent, std::move(projects)};
  }

 private:
  InMemoryStore store_;
  std::int64_t tokens_ = 0;
};

INSTANTIATE_TYPED_TEST_SUITE_P(InMemory, JobStoreContract, InMemoryHarness);

}  // namespace
}  // namespace kw::server::testing
