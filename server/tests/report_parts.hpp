// Reports sent in parts as the upload tests send them: a report split into
// parts, the report they split, and a part PUT as kw upload sends it (gzip),
// through any client with http::Client's calls.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../tests/support/report_factory.hpp"
#include "kw/http/client.hpp"
#include "kw/http/gzip.hpp"

namespace kw::server::testing {

// The report as `count` parts: the first every field and the first cases,
// the others {"cases": [...]}.
inline std::vector<nlohmann::json> split(const nlohmann::json& report, std::size_t count) {
  std::vector<nlohmann::json> parts;
  const nlohmann::json& cases = report["cases"];
  for (std::size_t k = 0; k < count; ++k) {
    nlohmann::json part = k == 0 ? report : nlohmann::json::object();
    part["cases"] = nlohmann::json::array();
    for (std::size_t i = cases.size() * k / count; i < cases.size() * (k + 1) / count; ++i)
      part["cases"].push_back(cases[i]);
    parts.push_back(std::move(part));
  }
  return parts;
}

inline nlohmann::json fifty_cases(std::uint64_t commit) {
  kw::testing::ReportSpec spec;
  spec.commit = kw::testing::make_commit(commit);
  spec.cases = 50;
  spec.replicates = 2;
  spec.samples = 10;
  return kw::testing::make_report(spec);
}

template <typename Client>
http::Response put_part(Client& client, const std::string& upload, std::size_t part, std::size_t of,
                        const nlohmann::json& body) {
  return client.request("PUT", upload + "/parts/" + std::to_string(part) + "?of=" + std::to_string(of),
                        http::gzip_compress(body.dump()), {{"Content-Encoding", "gzip"}});
}

}  // namespace kw::server::testing
