// How kw sends a run report (docs/api.md, "Reports in parts"): gzip in one
// request when it compresses to at most a part's size, else in parts that
// the server keeps until the last arrives and stores as one run. The upload
// is named after the report, so sending the same report again (a spooled one,
// after a part was lost) sends only the parts the server does not have.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/http/client.hpp"

namespace kw::agent {

// 8 MiB compressed (half of kw-server's default body limit), or
// KW_UPLOAD_PART_BYTES: set it lower behind a proxy with a smaller limit.
std::size_t upload_part_bytes();

struct ReportParts {
  std::string upload;                // the upload's name: the same for the same report and target
  std::vector<std::string> gzipped;  // each at most the part size
  // Each part's JSON as the server decodes it: its size and SHA-256, to tell
  // a part the server holds from one it holds under the same number.
  std::vector<std::size_t> bytes;
  std::vector<std::string> sha256;
};

// The report as parts of at most `part_bytes` compressed: the first holds
// every field and the first cases, each later one {"cases": [...]} with the
// cases that follow. Throws std::runtime_error when one case alone is larger.
ReportParts split_report(const std::string& target, const nlohmann::json& report, std::size_t part_bytes);

// Sends `report` to `target` ("/api/v1/runs", a job's report): the server's
// answer to the report, or the first refusal on the way (a part's, say).
// Throws http::ConnectionError when the server cannot be reached; what was
// sent before stays on the server for the next try. `say` hears of parts.
http::Response send_report(http::Client& client, const std::string& target, const nlohmann::json& report,
                           const std::function<void(const std::string&)>& say = {},
                           std::size_t part_bytes = upload_part_bytes());

}  // namespace kw::agent
