// How long raw samples are kept (schema 027): the table `samples` holds one
// partition per month they were stored in. A month older than the policy's
// days is dropped whole, after the samples that judging may still read, those
// of each case's newest judged runs, are moved into the current month. The
// summaries (measurements, cases, comparisons) stay with their runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <pqxx/pqxx>

namespace kw::server {

struct RetentionPolicy {
  int days = 180;  // 0: samples are kept for ever
  int runs = 10;   // per case, branch and GPU model: the newest judged runs keep theirs
};

struct RetentionOutcome {
  std::vector<std::string> dropped;  // the months' partitions
  std::int64_t moved = 0;            // rows moved forward, kept for their cases' newest runs
};

class SampleRetention {
 public:
  // This month's partition and the next, if missing.
  static void ensure_months(pqxx::work& tx);
  // The months past the policy, oldest first.
  static std::vector<std::string> expired_months(pqxx::work& tx, const RetentionPolicy& policy);
  // Moves the month's rows that the policy keeps into the current month; the
  // month can then be dropped.
  static std::int64_t keep_needed(pqxx::work& tx, const std::string& month, const RetentionPolicy& policy);
  static void drop_month(pqxx::work& tx, const std::string& month);
};

// The policy applied on `pool`-like transactions: each month in its own pair
// of transactions (move, then drop), so an ingest waits at most for one
// month's drop. Returns what was done; throws what the database threw.
template <typename Transact>
RetentionOutcome apply_retention(Transact&& transact, const RetentionPolicy& policy) {
  RetentionOutcome outcome;
  if (policy.days <= 0) return outcome;
  const std::vector<std::string> months =
      transact([&](pqxx::work& tx) { return SampleRetention::expired_months(tx, policy); });
  for (const std::string& month : months) {
    outcome.moved +=
        transact([&](pqxx::work& tx) { return SampleRetention::keep_needed(tx, month, policy); });
    transact([&](pqxx::work& tx) { SampleRetention::drop_month(tx, month); });
    outcome.dropped.push_back(month);
  }
  return outcome;
}

}  // namespace kw::server
