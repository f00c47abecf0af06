#include "store/pg_profile_store.hpp"

#include "store/notification_repository.hpp"

#include "store/run_repository.hpp"

namespace kw::server {

namespace {

class PgProfileTransaction final : public ProfileTransaction {
 public:
  PgProfileTransaction(pqxx::work& tx, const NotifierOptions& notifications)
      : tx_(tx), notifications_(notifications), queue_(tx, notifications) {}

  JobTransaction& queue() override { return queue_; }
  std::optional<std::string> project_of_run(std::int64_t run_id) override {
    return RunRepository::project_of_run(tx_, run_id);
  }
  std::pair<std::int64_t, bool> queue_profile(const ProfileRequest& request) override {
    return ProfileRepository::queue(tx_, request);
  }
  bool profiler_for(const std::string& gpu_model) override {
    return ProfileRepository::profiler_for(tx_, gpu_model);
  }
  std::optional<ProfileJobFacts> job_facts(std::int64_t job_id) override {
    return ProfileRepository::job_facts(tx_, job_id);
  }
  void store(std::int64_t profile_id, const ProfileResult& result) override {
    ProfileRepository::store(tx_, profile_id, result);
  }
  std::optional<nlohmann::json> get(std::int64_t profile_id) override {
    return ProfileRepository::get(tx_, profile_id);
  }
  std::string of_run_json(std::int64_t run_id) override {
    return ProfileRepository::of_run_json(tx_, run_id);
  }
  std::optional<std::string> csv(std::int64_t profile_id, const std::string& side) override {
    return ProfileRepository::csv(tx_, profile_id, side);
  }
  void profile_ended(std::int64_t job_id) override {
    NotificationRepository::profile_ended(tx_, notifications_, job_id);
  }

 private:
  pqxx::work& tx_;
  const NotifierOptions& notifications_;
  PgJobTransaction queue_;
};

}  // namespace

void PgProfileStore::transact(const std::function<void(ProfileTransaction&)>& work) {
  with_transaction(pool_, [&](pqxx::work& tx) {
    PgProfileTransaction profiles(tx, notifications_);
    work(profiles);
  });
}

}  // namespace kw::server
