#include "http/handlers/request_fields.hpp"

#include "errors.hpp"

namespace kw::server {

using nlohmann::json;

json require_object(const Request& request) {
  json body = request.json_body();
  if (!body.is_object()) throw Unprocessable("wrong_type", "body", "must be a JSON object");
  return body;
}

std::string body_string(const json& body, const std::string& field, bool required, std::size_t max_bytes) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) {
    if (required) throw Unprocessable("missing_field", field, "is required");
    return {};
  }
  return common::JsonReader::as_string(*it, field, !required, max_bytes);
}

std::optional<std::int64_t> body_integer(const json& body, const std::string& field, std::int64_t min,
                                         std::int64_t max) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) throw Unprocessable("not_an_integer", field, "must be an integer");
  return common::JsonReader::as_integer(*it, field, min, max);
}

int int_param(const Request& request, const std::string& name, int fallback, int max) {
  auto text = request.query_value(name);
  if (!text) return fallback;
  try {
    std::size_t used = 0;
    int value = std::stoi(*text, &used);
    if (used != text->size() || value < 1 || value > max) throw std::out_of_range(name);
    return value;
  } catch (const std::exception&) {
    throw BadRequest("bad_query", name + ": must be an integer from 1 to " + std::to_string(max));
  }
}

Page page_params(const Request& request, int default_per_page) {
  constexpr int kMaxPerPage = 2000;
  Page page;
  page.per_page = int_param(request, "per_page", default_per_page, kMaxPerPage);
  page.number = int_param(request, "page", 1, 1000000);
  return page;
}

void check_project(const Request& request, const std::string& project) {
  if (request.caller) request.caller->require_project(project);
}

std::int64_t readable_project(pqxx::work& tx, const Request& request, const std::string& name) {
  check_project(request, name);
  auto id = RunRepository::find_project(tx, name);
  if (!id) throw NotFound("no_such_project", "no project \"" + name + "\"");
  return *id;
}

}  // namespace kw::server
