#include "http_types.hpp"

#include <charconv>

#include "errors.hpp"

namespace kw::server {

std::string_view to_string(Scope scope) {
  switch (scope) {
    case Scope::read:
      return "read";
    case Scope::agent:
      return "agent";
    case Scope::ci:
      return "ci";
    case Scope::admin:
      return "admin";
  }
  return "read";
}

std::optional<Scope> scope_from(std::string_view text) {
  for (Scope scope : {Scope::read, Scope::agent, Scope::ci, Scope::admin}) {
    if (to_string(scope) == text) return scope;
  }
  return std::nullopt;
}

const std::string& Request::param(const std::string& name) const {
  auto it = path_params.find(name);
  if (it == path_params.end()) throw NotFound("missing path parameter " + name);
  return it->second;
}

std::optional<std::string> Request::query_value(const std::string& name) const {
  auto it = query.find(name);
  if (it == query.end()) return std::nullopt;
  return it->second;
}

std::int64_t Request::id_param(const std::string& name) const {
  const std::string& text = param(name);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    throw NotFound(name + " \"" + text + "\" is not a positive integer id");
  }
  return value;
}

nlohmann::json Request::json_body() const {
  if (body.empty()) throw BadRequest("request body is empty; expected JSON");
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& error) {
    throw BadRequest("request body is not valid JSON (byte " + std::to_string(error.byte) + ")");
  }
}

Response Response::json(int status, const nlohmann::json& value) {
  return json_text(status, value.dump());
}

Response Response::json_text(int status, std::string text) {
  Response response;
  response.status = status;
  response.body = std::move(text);
  return response;
}

Response Response::error(int status, const std::string& code, const std::string& message) {
  return json(status, {{"error", code}, {"message", message}});
}

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      int value = 0;
      auto [end, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
      if (ec == std::errc() && end == text.data() + i + 3) {
        out.push_back(static_cast<char>(value));
        i += 2;
        continue;
      }
    }
    out.push_back(c == '+' ? ' ' : c);
  }
  return out;
}

std::map<std::string, std::string> parse_query(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    std::string key = percent_decode(pair.substr(0, eq));
    std::string value = eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1));
    out[key] = value;
  }
  return out;
}

}  // namespace kw::server
