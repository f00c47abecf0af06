#include "store/pg_bisect_store.hpp"

#include "store/bisect_repository.hpp"

namespace kw::server {

namespace {

class PgBisectTransaction final : public BisectTransaction {
 public:
  explicit PgBisectTransaction(pqxx::work& tx) : tx_(tx) {}

  std::optional<std::string> project_of(std::int64_t bisect_id) override {
    return BisectRepository::project_of(tx_, bisect_id);
  }
  std::optional<nlohmann::json> get(std::int64_t bisect_id) override {
    return BisectRepository::get(tx_, bisect_id);
  }
  std::optional<std::string> cancel(std::int64_t bisect_id) override {
    return BisectRepository::cancel(tx_, bisect_id);
  }

 private:
  pqxx::work& tx_;
};

}  // namespace

void PgBisectStore::transact(const std::function<void(BisectTransaction&)>& work) {
  with_transaction(pool_, [&](pqxx::work& tx) {
    PgBisectTransaction bisects(tx);
    work(bisects);
  });
}

}  // namespace kw::server
