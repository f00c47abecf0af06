// The run, upload and bisect stores' contracts on the in-memory stand-in the
// rules of ingest, verdicts, uploads and bisects are tested on
// (detection_test.cpp, upload_test.cpp).
#include "bisect_store_contract.hpp"
#include "in_memory_store.hpp"
#include "run_store_contract.hpp"
#include "upload_store_contract.hpp"

namespace kw::server::testing {
namespace {

class InMemoryHarness {
 public:
  RunStore& runs() { return store_; }
  UploadStore& uploads() { return store_; }
  JobStore& jobs() { return store_; }
  BisectStore& bisects() { return store_; }
  std::int64_t add_project(const std::string& name) { return store_.create_project(name, "main")->id; }
  void age_upload_claims(double seconds) { store_.advance(seconds); }
  Caller token(const std::string& name, Scope scope) {
    return *store_.authenticate(store_.create_token(name, scope, std::nullopt).first);
  }

 private:
  InMemoryStore store_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(InMemory, RunStoreContract, InMemoryHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(InMemory, UploadStoreContract, InMemoryHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(InMemory, BisectStoreContract, InMemoryHarness);

}  // namespace
}  // namespace kw::server::testing
