#include "http/http_types.hpp"

#include <charconv>

#include <boost/beast/core/string.hpp>

#include "kw/common/json_in_parts.hpp"
#include "kw/common/run_report.hpp"
#include "kw/http/gzip.hpp"

#include "errors.hpp"

namespace kw::server {

const std::string& Request::param(const std::string& name) const {
  auto it = path_params.find(name);
  if (it == path_params.end()) throw NotFound("no_such_endpoint", "missing path parameter " + name);
  return it->second;
}

std::optional<std::string> Request::query_value(const std::string& name) const {
  auto it = query.find(name);
  if (it == query.end()) return std::nullopt;
  return it->second;
}

std::int64_t Request::id_param(const std::string& name, const std::string& resource) const {
  const std::string& text = param(name);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    throw NotFound("no_such_" + resource, resource + " \"" + text + "\" is not a positive integer id");
  }
  return value;
}

namespace {

// What no handler may see: nesting past kMaxJsonDepth (serializing it
// recurses once per level) and NUL characters (PostgreSQL's text and jsonb
// cannot hold them; libpq would cut the string there). The recursion is
// bounded by the depth it checks. Returns the path of a NUL, or "" for none.
std::string check_json(const nlohmann::json& value, int depth, const std::string& path) {
  if (depth > common::kMaxJsonDepth)
    throw BadRequest("bad_json", "request body is nested deeper than " +
                                     std::to_string(common::kMaxJsonDepth) + " levels");
  auto has_nul = [](const std::string& text) { return text.find('\0') != std::string::npos; };
  if (value.is_string()) return has_nul(value.get_ref<const std::string&>()) ? path : "";
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      std::string at = path.empty() ? key : path + "." + key;
      if (has_nul(key)) {
        // Shown escaped: the message is a C string further on.
        std::string shown;
        for (char c : at) shown += c == '\0' ? std::string("\\u0000") : std::string(1, c);
        return shown;
      }
      if (item.is_structured() || item.is_string())
        if (std::string found = check_json(item, depth + 1, at); !found.empty()) return found;
    }
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      const nlohmann::json& item = value[i];
      if (!item.is_structured() && !item.is_string()) continue;  // samples: no path built for them
      if (std::string found = check_json(item, depth + 1, path + "[" + std::to_string(i) + "]");
          !found.empty())
        return found;
    }
  }
  return "";
}

}  // namespace

nlohmann::json Request::json_body() const {
  if (body.empty()) throw BadRequest("bad_json", "request body is empty; expected JSON");
  nlohmann::json document;
  try {
    const common::JsonLimits limits{common::kMaxJsonDepth,
                                    body.size() * json_memory.per_byte + json_memory.slack, memory.get()};
    document = common::parse_in_parts(body, limits);
  } catch (const common::JsonTooDeep&) {
    throw BadRequest("bad_json", "request body is nested deeper than " +
                                     std::to_string(common::kMaxJsonDepth) + " levels");
  } catch (const common::JsonTooLarge& error) {
    throw PayloadTooLarge("json_too_large", std::string("request body: ") + error.what() + " (" +
                                                std::to_string(json_memory.per_byte) +
                                                " times its size); send fewer or larger values");
  } catch (const common::MemoryBusy& error) {
    throw ServiceUnavailable("busy", std::string(error.what()) + "; retry shortly");
  } catch (const nlohmann::json::parse_error& error) {
    throw BadRequest("bad_json", "request body is not valid JSON (byte " + std::to_string(error.byte) + ")");
  } catch (const nlohmann::json::exception& error) {
    // A number out of range (1e400) is no parse error to the parser.
    throw BadRequest("bad_json", std::string("request body is not valid JSON: ") + error.what());
  }
  if (std::string at = check_json(document, 1, ""); !at.empty())
    throw Unprocessable("nul_character", at, "contains a NUL character (\\u0000)");
  return document;
}

Response Response::json(int status, const nlohmann::json& value) {
  // A message quoting bytes that are not UTF-8 must not turn the answer into an exception.
  return json_text(status, value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Response Response::json_text(int status, std::string text) {
  Response response;
  response.status = status;
  response.body = std::move(text);
  return response;
}

Response Response::error(int status, const std::string& code, const std::string& message,
                         const std::string& field) {
  nlohmann::json body{{"error", code}, {"message", message}};
  if (!field.empty()) body["field"] = field;
  Response response = json(status, body);
  // Every 503 is a moment's trouble (the database, the connection cap): say when to come back.
  if (status == 503) response.headers.emplace_back("Retry-After", "2");
  return response;
}

namespace {

bool valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k)
      if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return false;
    if (length == 2 && c < 0xC2) return false;  // overlong
    i += length;
  }
  return true;
}

}  // namespace

void decode_content(Request& request, std::size_t decoded_limit) {
  auto encoding = request.headers.find("content-encoding");
  if (encoding == request.headers.end()) return;
  const std::string& name = encoding->second;
  if (boost::beast::iequals(name, "identity")) return;
  if (!boost::beast::iequals(name, "gzip") && !boost::beast::iequals(name, "x-gzip")) {
    throw HttpError(415, "unsupported_encoding",
                    "Content-Encoding '" + encoding->second + "' is not supported: send gzip or identity");
  }
  std::size_t reserved = 0;
  request.sent_body = std::move(request.body);
  try {
    request.body = kw::http::gzip_decompress(request.sent_body, decoded_limit, [&](std::size_t size) {
      if (request.memory && size > reserved) request.memory->take(size - reserved);
      reserved = std::max(reserved, size);
    });
  } catch (const kw::http::GzipTooLarge&) {
    throw PayloadTooLarge("payload_too_large",
                          "the gzip request body decompresses to more than the limit of " +
                              std::to_string(decoded_limit) + " bytes");
  } catch (const kw::http::GzipError& e) {
    throw BadRequest("bad_encoding", std::string("Content-Encoding gzip: ") + e.what());
  } catch (const common::MemoryBusy& e) {
    throw ServiceUnavailable("busy", std::string(e.what()) + "; retry shortly");
  }
  // The buffer was cut to the decoded size; the lease keeps what it took.
  request.headers.erase(encoding);
}

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      int value = 0;
      if (i + 2 >= text.size()) return std::nullopt;
      auto [end, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
      if (ec != std::errc() || end != text.data() + i + 3 || value == 0) return std::nullopt;
      out.push_back(static_cast<char>(value));
      i += 2;
      continue;
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  if (!valid_utf8(out)) return std::nullopt;
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
    std::optional<std::string> key = percent_decode(pair.substr(0, eq), true);
    std::optional<std::string> value =
        eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1), true);
    if (!key || !value) throw BadRequest("bad_encoding", "the query string is not percent-encoded UTF-8");
    out[*key] = *value;
  }
  return out;
}

}  // namespace kw::server
