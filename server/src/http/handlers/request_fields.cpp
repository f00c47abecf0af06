#include "http/handlers/request_fields.hpp"

#include <algorithm>
#include <array>

#include "errors.hpp"
#include "kw/common/detection.hpp"

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

std::string glob_to_like(const std::string& glob) {
  if (glob.empty()) return {};
  const bool anchored = glob.find_first_of("*?") != std::string::npos;
  std::string like = anchored ? "" : "%";
  for (char c : glob) {
    if (c == '*') {
      like += '%';
    } else if (c == '?') {
      like += '_';
    } else {
      if (c == '%' || c == '_' || c == '\\') like += '\\';
      like += c;
    }
  }
  if (!anchored) like += '%';
  return like;
}

CaseFilter case_filter(const Request& request, bool with_status) {
  CaseFilter filter;
  filter.gpu_model = request.query_value("gpu").value_or("");
  const std::string glob = request.query_value("case").value_or("");
  if (glob.size() > common::kMaxNameBytes)
    throw BadRequest("bad_query", "case: at most " + std::to_string(common::kMaxNameBytes) + " bytes");
  filter.name_like = glob_to_like(glob);
  const std::string statuses = request.query_value("status").value_or("");
  if (!statuses.empty() && !with_status)
    throw BadRequest("bad_query", "status: filters the overview and compare, not a list of runs");
  constexpr std::array kStatuses = {common::ChangeStatus::regression, common::ChangeStatus::improvement,
                                    common::ChangeStatus::unchanged, common::ChangeStatus::inconclusive,
                                    common::ChangeStatus::no_baseline};
  // "undetectable": the cases whose smallest detectable change is above their threshold.
  constexpr std::string_view kUndetectable = "undetectable";
  std::size_t start = 0;
  while (start < statuses.size()) {
    std::size_t end = std::min(statuses.find(',', start), statuses.size());
    const std::string status = statuses.substr(start, end - start);
    if (status != kUndetectable &&
        std::none_of(kStatuses.begin(), kStatuses.end(),
                     [&](common::ChangeStatus known) { return common::to_string(known) == status; })) {
      std::string known;
      for (common::ChangeStatus each : kStatuses)
        (known += known.empty() ? "" : ", ") += common::to_string(each);
      throw BadRequest("bad_query", "status: \"" + status + "\" is not one of " + known + ", " +
                                        std::string(kUndetectable));
    }
    start = end + 1;
  }
  filter.statuses = statuses;
  return filter;
}

}  // namespace kw::server
