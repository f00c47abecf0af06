#include "notify/outbound_http.hpp"

#include <stdexcept>

#include "kw/common/sha256.hpp"
#include "kw/http/client.hpp"
#include "model/webhook_address.hpp"

namespace kw::server {

namespace {

// The URL's scheme and authority, and the target the POST goes to (its path
// and query, as written).
std::pair<std::string, std::string> split_url(const std::string& url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos || (url.rfind("https://", 0) != 0 && url.rfind("http://", 0) != 0))
    throw std::runtime_error("unsupported URL (need http:// or https://): " + url);
  const std::size_t path = url.find_first_of("/?", scheme + 3);
  if (path == std::string::npos) return {url, "/"};
  std::string target = url.substr(path);
  if (target.front() == '?') target.insert(0, "/");
  return {url.substr(0, path), target};
}

}  // namespace

OutboundResponse post_json(const std::string& url, const std::string& body,
                           const std::map<std::string, std::string>& headers, OutboundTimeouts timeouts,
                           Reach reach) {
  const auto [base, target] = split_url(url);
  http::ClientOptions options;
  options.connect_timeout = timeouts.connect;
  options.timeout = timeouts.total;
  options.total = timeouts.total;
  options.answer_limit = std::size_t{64} * 1024;
  if (reach == Reach::public_only)
    options.may_connect = [](const boost::asio::ip::address& address) {
      return !is_private_address(address);
    };
  std::map<std::string, std::string> sent{{"User-Agent", "kernelwatch"}};
  sent.insert(headers.begin(), headers.end());
  try {
    http::Client client(base, {}, options);
    http::Response response = client.request("POST", target, body, sent);
    return {response.status, std::move(response.body)};
  } catch (const http::ConnectionError& error) {
    // Its step and reason alone: the URL is the project's, what the peer said its own.
    if (error.step() == "refused")
      throw std::runtime_error(
          "refused: the host resolves only to loopback, private or link-local addresses "
          "(kw-server --allow-private-webhooks allows them)");
    if (error.timed_out() && error.step() == "connect")
      throw std::runtime_error("connect: timed out after " + std::to_string(timeouts.connect.count()) + " s");
    if (error.timed_out())
      throw std::runtime_error("timed out after " + std::to_string(timeouts.total.count()) + " s (" +
                               error.step() + ")");
    throw std::runtime_error(error.step() + ": " + error.reason());
  }
}

}  // namespace kw::server
