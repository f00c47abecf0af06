// A run report too large for one request, sent in parts and stored as one run
// (docs/api.md, "Reports in parts"; service/upload_service.hpp).
#include <algorithm>

#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "kw/common/json_in_parts.hpp"
#include "kw/common/sha256.hpp"
#include "kw/http/gzip.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

constexpr int kMaxParts = 1000;

// The client's name for its upload: what it can derive again from the report
// alone, so that a resend finds the parts sent before.
const std::string& upload_id(const Request& request) {
  const std::string& id = request.param("upload");
  const bool plain = std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
  });
  if (!plain || id.size() < 8 || id.size() > 64)
    throw BadRequest("bad_query", "upload: \"" + id + "\" is not 8 to 64 letters, digits, '-' or '_'");
  return id;
}

// A number 0..max written plainly ("7", not "07" or "+7"); -1 otherwise.
int part_number(const std::string& text, int max) {
  if (text.empty() || text.size() > 4 || (text.size() > 1 && text[0] == '0')) return -1;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value <= max ? value : -1;
}

json state_json(const std::string& id, const UploadState& state) {
  json received = json::array();
  json held = json::array();
  for (const UploadPart& part : state.received) {
    received.push_back(part.part);
    held.push_back({{"part", part.part}, {"bytes", part.decoded_bytes}, {"sha256", part.sha256}});
  }
  json answer{{"upload", id},
              {"parts", state.parts},
              {"received", std::move(received)},
              {"held", std::move(held)},
              {"bytes", state.bytes},
              {"stored_bytes", state.stored_bytes}};
  if (state.run_id) answer["run_id"] = *state.run_id;
  return answer;
}

// A part is a JSON object: the first holds the report with the first of its
// cases, each later one only {"cases": [...]}, the cases that follow.
void check_part(const json& body, int part, const std::string& project) {
  if (!body.is_object()) throw Unprocessable("wrong_type", "(body)", "a part is a JSON object");
  auto cases = body.find("cases");
  if (cases == body.end())
    throw Unprocessable("missing_field", "cases", "every part holds its cases (maybe [])");
  if (!cases->is_array()) throw Unprocessable("wrong_type", "cases", "is an array of cases");
  if (part == 0) {
    auto named = body.find("project");
    if (named != body.end() && named->is_string() && named->get<std::string>() != project) {
      throw Unprocessable(
          "inconsistent", "project",
          "is \"" + named->get<std::string>() + "\" but the upload is to project \"" + project + "\"");
    }
    return;
  }
  for (const auto& [key, value] : body.items()) {
    if (key != "cases")
      throw Unprocessable("unknown_field", key, "a part after the first holds only \"cases\"");
  }
}

// The report its parts make: the first part with every later part's cases
// appended, in order. Each part is parsed as its PUT parsed it (the same
// limits), so a completion accepts what its parts were accepted as.
json assemble(const std::vector<StoredPartBody>& bodies, const Request& request, std::size_t decoded_limit) {
  std::size_t decoded = 0;
  auto parse = [&](const StoredPartBody& body) {
    Request part;
    part.memory = request.memory;
    part.json_memory = request.json_memory;
    part.body = body.gzip ? kw::http::gzip_decompress(body.data, decoded_limit - decoded) : body.data;
    decoded += part.body.size();
    return part.json_body();
  };
  json report = parse(bodies.front());
  json& cases = report["cases"];
  for (std::size_t i = 1; i < bodies.size(); ++i) {
    json part = parse(bodies[i]);
    for (json& one : part["cases"]) cases.push_back(std::move(one));
  }
  return report;
}

// PUT .../parts/{part}?of=N: one part, kept as sent.
Response put_part(UploadService& uploads, const Request& request) {
  // Another project's upload is refused before its part is read: the
  // caller learns nothing of what that project would accept.
  request.caller->require_project(request.param("project"));
  const std::string& id = upload_id(request);
  const int parts = part_number(request.query_value("of").value_or(""), kMaxParts);
  if (parts < 1)
    throw BadRequest("bad_query",
                     "of: the upload's number of parts, 1 to " + std::to_string(kMaxParts) + ", is required");
  const std::string& part_text = request.param("part");
  const int part = part_number(part_text, parts - 1);
  if (part < 0)
    throw BadRequest("bad_query", "part: \"" + part_text + "\" is not a part number from 0 to " +
                                      std::to_string(parts - 1));
  check_part(request.json_body(), part, request.param("project"));
  const bool gzip = !request.sent_body.empty();
  const PartBody body{gzip ? request.sent_body : request.body, gzip,
                      static_cast<std::int64_t>(request.body.size()), common::sha256_hex(request.body)};
  return Response::json(200, state_json(id, uploads.put_part(*request.caller, request.param("project"), id,
                                                             part, parts, body)));
}

// Completes the upload: its report ingested whole, answered as POST
// /api/v1/runs answers (a job's report completes its job). Again after that,
// the same answer, marked duplicate.
Response complete(UploadService& uploads, IngestService& ingest, const Request& request) {
  const std::string& id = upload_id(request);
  const auto started = std::chrono::steady_clock::now();
  const CompletedUpload completed = uploads.complete(
      *request.caller, request.param("project"), id, [&](const std::vector<StoredPartBody>& bodies) {
        json report = assemble(bodies, request, uploads.limits().report_bytes);
        ingest.observe(IngestService::Phase::parse, std::chrono::steady_clock::now() - started);
        return report;
      });
  return stored_run(completed.stored, completed.job_id);
}

}  // namespace

void add_upload_routes(Router& router, UploadService& uploads, IngestService& ingest) {
  const Access agent = Access::agent_reports();

  router.add("PUT", "/api/v1/projects/{project}/uploads/{upload}/parts/{part}", agent,
             [&uploads](Request& request) { return put_part(uploads, request); });

  router.add("GET", "/api/v1/projects/{project}/uploads/{upload}", agent, [&uploads](Request& request) {
    const std::string& id = upload_id(request);
    return Response::json(200, state_json(id, uploads.state(*request.caller, request.param("project"), id)));
  });

  router.add("POST", "/api/v1/projects/{project}/uploads/{upload}", agent,
             [&uploads, &ingest](Request& request) { return complete(uploads, ingest, request); });
}

}  // namespace kw::server
