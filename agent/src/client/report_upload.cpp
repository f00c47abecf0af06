#include "client/report_upload.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <thread>

#include "kw/common/hash.hpp"
#include "kw/common/sha256.hpp"
#include "kw/http/gzip.hpp"

namespace kw::agent {

using nlohmann::json;

namespace {

const std::map<std::string, std::string> kGzip{{"Content-Encoding", "gzip"}};

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// The cases [first, end) as a part: the report's other fields with the
// first part only.
json part_of(const json& report, std::size_t first, std::size_t end, bool head) {
  json part = json::object();
  if (head) {
    for (const auto& [key, value] : report.items())
      if (key != "cases") part[key] = value;
  }
  json& cases = part["cases"] = json::array();
  for (std::size_t i = first; i < end; ++i) cases.push_back(report["cases"][i]);
  return part;
}

// A server that refuses a body for its encoding alone (400 "bad_encoding": an
// older kw-server whose inflate refused some valid gzip) takes the same
// bytes uncompressed: such a report is never refused for good.
bool refused_encoding(const http::Response& response) {
  return response.status == 400 && response.body.find("\"bad_encoding\"") != std::string::npos;
}

// Completes the upload. Another completion holds it (409 upload_completing):
// one under way ends within seconds, and one whose server or database died
// leaves a claim the server lets go within 20 s, so the completion is asked
// again for up to a minute before its answer is taken as it is.
http::Response complete_upload(http::Client& client, const std::string& upload,
                               const std::function<void(const std::string&)>& say) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  for (int waited = 0;; ++waited) {
    http::Response stored = client.request("POST", upload, "{}");
    if (stored.status != 409 || stored.body.find("\"upload_completing\"") == std::string::npos ||
        std::chrono::steady_clock::now() > give_up)
      return stored;
    if (say && waited == 0) say("another completion of this upload is under way or died; asking again");
    std::this_thread::sleep_for(std::chrono::seconds(std::min(1 << std::min(waited, 3), 5)));
  }
}

}  // namespace

std::size_t upload_part_bytes() {
  if (const char* text = std::getenv("KW_UPLOAD_PART_BYTES")) {
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (end != text && *end == '\0' && value >= 1024) return static_cast<std::size_t>(value);
    throw std::runtime_error(std::string("KW_UPLOAD_PART_BYTES: \"") + text +
                             "\" is not a byte count >= 1024");
  }
  return std::size_t{8} << 20;
}

namespace {

// `whole`: the compressed size of `text`, the report's JSON.
ReportParts split(const std::string& target, const json& report, const std::string& text, std::size_t whole,
                  std::size_t part_bytes) {
  ReportParts parts;
  parts.upload = hex(common::fnv1a64(target + '\n' + text)) + "-" + std::to_string(text.size());
  const json& cases = report.at("cases");
  // Each case's share of the text, to cut the cases where the text is even.
  std::vector<std::size_t> ends;  // cumulative
  std::size_t total = 0;
  for (const json& one : cases) ends.push_back(total += one.dump().size());
  for (std::size_t count = std::max<std::size_t>(2, whole / part_bytes + 1);; count *= 2) {
    if (count > cases.size() * 2 + 2)
      throw std::runtime_error("a case of the report compresses to more than the part size of " +
                               std::to_string(part_bytes) + " bytes");
    parts.gzipped.clear();
    parts.bytes.clear();
    parts.sha256.clear();
    bool fits = true;
    std::size_t first = 0;
    for (std::size_t k = 0; k < count && fits; ++k) {
      // The case where this part's even share of the text ends.
      const std::size_t upto = total * (k + 1) / count;
      std::size_t end = first;
      while (end < cases.size() && (ends[end] <= upto || k + 1 == count)) ++end;
      const std::string part = part_of(report, first, end, k == 0).dump();
      std::string gzipped = http::gzip_compress(part);
      fits = gzipped.size() <= part_bytes;
      parts.gzipped.push_back(std::move(gzipped));
      parts.bytes.push_back(part.size());
      parts.sha256.push_back(common::sha256_hex(part));
      first = end;
    }
    if (fits) return parts;
  }
}

}  // namespace

ReportParts split_report(const std::string& target, const json& report, std::size_t part_bytes) {
  const std::string text = report.dump();
  return split(target, report, text, http::gzip_compress(text).size(), part_bytes);
}

http::Response send_report(http::Client& client, const std::string& target, const json& report,
                           const std::function<void(const std::string&)>& say, std::size_t part_bytes) {
  const std::string text = report.dump();
  std::string whole = http::gzip_compress(text);
  if (whole.size() <= part_bytes) {
    http::Response sent = client.request("POST", target, whole, kGzip);
    if (!refused_encoding(sent)) return sent;
    if (say) say("the server could not decode the gzip body (" + sent.body + "); sending it uncompressed");
    return client.request("POST", target, text);
  }
  const ReportParts parts = split(target, report, text, whole.size(), part_bytes);
  whole.clear();
  const std::string upload = "/api/v1/projects/" + http::url_encode(report.at("project").get<std::string>()) +
                             "/uploads/" + parts.upload;
  // Twice at most: once more when the server lost a part between the sending
  // and the completing (an upload expired meanwhile).
  for (int attempt = 0;; ++attempt) {
    std::set<int> held;
    http::Response state = client.get(upload);
    if (state.status == 200) {
      const json answer = state.json();
      // Stored before (its answer lost on the way): completing again answers that run.
      if (answer.contains("run_id")) return client.request("POST", upload, "{}");
      // A part is skipped only when the server holds this very part: the
      // same size and hash of its JSON.
      for (const json& part : answer.value("held", json::array())) {
        const int k = part.value("part", -1);
        if (k < 0 || k >= static_cast<int>(parts.gzipped.size())) continue;
        const auto index = static_cast<std::size_t>(k);
        if (part.value("bytes", std::int64_t{-1}) == static_cast<std::int64_t>(parts.bytes[index]) &&
            part.value("sha256", std::string()) == parts.sha256[index])
          held.insert(k);
      }
    } else if (state.status != 404) {
      return state;
    }
    const int count = static_cast<int>(parts.gzipped.size());
    if (say) {
      say("report in " + std::to_string(count) + " parts" +
          (held.empty() ? "" : " (" + std::to_string(held.size()) + " already on the server)"));
    }
    for (int k = 0; k < count; ++k) {
      if (held.count(k)) continue;
      const std::string part = upload + "/parts/" + std::to_string(k) + "?of=" + std::to_string(count);
      http::Response sent = client.request("PUT", part, parts.gzipped[k], kGzip);
      if (refused_encoding(sent)) {
        if (say)
          say("part " + std::to_string(k) + ": the server could not decode it; sending it uncompressed");
        sent = client.request("PUT", part, http::gzip_decompress(parts.gzipped[k], parts.bytes[k]));
      }
      if (sent.status != 200) return sent;
    }
    http::Response stored = complete_upload(client, upload, say);
    if (stored.status != 409 || attempt > 0 || stored.body.find("upload_incomplete") == std::string::npos)
      return stored;
  }
}

}  // namespace kw::agent
