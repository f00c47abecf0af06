#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "http/handlers/handlers.hpp"

namespace kw::server {

namespace {

// "/" is index.html; no path may leave the directory.
std::optional<Response> static_file(const std::string& root, const Request& request) {
  if (root.empty()) return std::nullopt;
  std::string path = request.path == "/" ? "/index.html" : request.path;
  if (path.find("..") != std::string::npos || path.find('\0') != std::string::npos) return std::nullopt;
  // A folder opens as a stream too, and reads as nothing: files only.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(root + path, ec)) return std::nullopt;
  std::ifstream in(root + path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream content;
  content << in.rdbuf();
  static const std::map<std::string, std::string> types = {{".html", "text/html; charset=utf-8"},
                                                           {".js", "text/javascript; charset=utf-8"},
                                                           {".mjs", "text/javascript; charset=utf-8"},
                                                           {".css", "text/css; charset=utf-8"},
                                                           {".png", "image/png"},
                                                           {".svg", "image/svg+xml"},
                                                           {".json", "application/json"}};
  auto dot = path.rfind('.');
  auto type = dot == std::string::npos ? types.end() : types.find(path.substr(dot));
  Response response;
  response.content_type = type == types.end() ? "application/octet-stream" : type->second;
  response.body = content.str();
  response.headers.emplace_back("Cache-Control", path == "/index.html" ? "no-cache" : "max-age=300");
  return response;
}

}  // namespace

void add_static_files(Router& router, std::string root) {
  router.set_static([root = std::move(root)](const Request& request) { return static_file(root, request); });
}

}  // namespace kw::server
