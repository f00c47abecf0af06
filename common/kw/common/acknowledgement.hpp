// Which regressions an acknowledgement covers: the rule that carries an
// acknowledged regression to the other runs of the same change
// (docs/detection.md), applied by whichever store finds those runs.
#pragma once

#include <map>
#include <string>

namespace kw::common {

// A candidate comparison flagged as a regression.
struct FlaggedRegression {
  double ratio = 0, upper = 0, threshold = 0;
};

// Regressions keyed "kind case": an energy regression is covered by an
// acknowledged energy regression. An acknowledgement covers a run of the
// same change when every case the run flags was flagged in the acknowledged
// run, and by no more than that run's interval allowed, give or take one
// threshold (what a further change must exceed to be flagged on its own).
inline bool acknowledgement_covers(const std::map<std::string, FlaggedRegression>& acknowledged,
                                   const std::map<std::string, FlaggedRegression>& flagged) {
  if (flagged.empty()) return false;
  for (const auto& [name, flag] : flagged) {
    auto it = acknowledged.find(name);
    if (it == acknowledged.end() || flag.ratio > it->second.upper * (1 + flag.threshold)) return false;
  }
  return true;
}

}  // namespace kw::common
