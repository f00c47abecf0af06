// kw::http::Client over https:// against a real TLS server on a loopback port,
// with certificates made for the test by the openssl command; its deadlines
// and address rule against plain loopback sockets.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "kw/http/client.hpp"

namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
namespace fs = std::filesystem;

fs::path make_temp_dir() {
  std::string pattern = (fs::temp_directory_path() / "kw-http-tls-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

// A self-signed certificate for `names` (subjectAltName entries), as PEM files.
void make_certificate(const fs::path& dir, const std::string& stem, const std::string& names) {
  std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=kw-test -addext "
      "subjectAltName=" +
      names + " -keyout " + (dir / (stem + ".key")).string() + " -out " + (dir / (stem + ".pem")).string() +
      " 2>/dev/null";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("openssl req failed: " + command);
}

// Answers every request with its method, target and Authorization header as
// JSON, keeping connections alive; counts the connections it accepted.
class TlsEchoServer {
 public:
  TlsEchoServer(const fs::path& certificate, const fs::path& key) : context_(ssl::context::tls_server) {
    context_.use_certificate_chain_file(certificate.string());
    context_.use_private_key_file(key.string(), ssl::context::pem);
    acceptor_.open(tcp::v4());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind({net::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }
  ~TlsEchoServer() {
    stopping_ = true;
    beast::error_code ec;
    acceptor_.close(ec);
    // Wakes a blocking accept.
    try {
      net::io_context io;
      tcp::socket poke(io);
      poke.connect({net::ip::make_address("127.0.0.1"), port_}, ec);
    } catch (...) {
    }
    thread_.join();
  }
  unsigned short port() const { return port_; }
  int connections() const { return connections_; }

 private:
  void serve() {
    while (!stopping_) {
      tcp::socket socket(io_);
      beast::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stopping_) return;
      ++connections_;
      beast::ssl_stream<tcp::socket> stream(std::move(socket), context_);
      stream.handshake(ssl::stream_base::server, ec);
      if (ec) continue;  // the client refused our certificate
      beast::flat_buffer buffer;
      for (;;) {
        bhttp::request<bhttp::string_body> request;
        bhttp::read(stream, buffer, request, ec);
        if (ec) break;
        bhttp::response<bhttp::string_body> response(bhttp::status::ok, 11);
        response.set(bhttp::field::content_type, "application/json");
        response.body() = nlohmann::json{
            {"method", std::string(request.method_string())},
            {"target", std::string(request.target())},
            {"authorization", std::string(request[bhttp::field::authorization])},
            {"body",
             request.body()}}.dump();
        response.keep_alive(request.keep_alive());
        response.prepare_payload();
        bhttp::write(stream, response, ec);
        if (ec || !request.keep_alive()) break;
      }
      stream.shutdown(ec);
    }
  }

  net::io_context io_;
  ssl::context context_;
  tcp::acceptor acceptor_{io_};
  unsigned short port_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

class HttpsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir();
    make_certificate(dir_, "loopback", "IP:127.0.0.1");
    make_certificate(dir_, "other", "IP:127.0.0.1");
    make_certificate(dir_, "named", "DNS:kw.example");
  }
  void TearDown() override {
    unsetenv("SSL_CERT_FILE");
    fs::remove_all(dir_);
  }
  void trust(const std::string& stem) { setenv("SSL_CERT_FILE", (dir_ / (stem + ".pem")).c_str(), 1); }
  fs::path pem(const std::string& stem) const { return dir_ / (stem + ".pem"); }
  fs::path key(const std::string& stem) const { return dir_ / (stem + ".key"); }

  fs::path dir_;
};

TEST_F(HttpsClientTest, RequestsGoOverOneVerifiedKeptAliveConnection) {
  TlsEchoServer server(pem("loopback"), key("loopback"));
  trust("loopback");
  kw::http::Client client("https://127.0.0.1:" + std::to_string(server.port()) + "/api/", "kw_secret");
  auto first = client.get("/one");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json()["target"], "/api/one");
  EXPECT_EQ(first.json()["authorization"], "Bearer kw_secret");
  auto patch = client.request("PATCH", "/two", R"({"body":"x"})");
  EXPECT_EQ(patch.json()["method"], "PATCH");
  EXPECT_EQ(patch.json()["body"], R"({"body":"x"})");
  EXPECT_EQ(client.post("/three", {{"a", 1}}).json()["method"], "POST");
  EXPECT_EQ(server.connections(), 1);
}

TEST_F(HttpsClientTest, AnUntrustedCertificateIsRefusedWithTheReason) {
  TlsEchoServer server(pem("loopback"), key("loopback"));
  trust("other");  // same name, another key: not the server's certificate
  kw::http::Client client("https://127.0.0.1:" + std::to_string(server.port()));
  try {
    client.get("/x");
    FAIL() << "an untrusted certificate was accepted";
  } catch (const kw::http::ConnectionError& error) {
    EXPECT_NE(std::string(error.what()).find("certificate verify failed"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("https://127.0.0.1:"), std::string::npos) << error.what();
  }
}

TEST_F(HttpsClientTest, ACertificateForAnotherNameIsRefused) {
  TlsEchoServer server(pem("named"), key("named"));
  trust("named");  // trusted, but issued for kw.example, not 127.0.0.1
  kw::http::Client client("https://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_THROW(client.get("/x"), kw::http::ConnectionError);
}

// A peer that accepts and never answers costs the client its timeout, with
// the step named; before, the blocking read waited for as long as the peer
// held the connection.
TEST(HttpClientTimeoutTest, APeerThatNeverAnswersTimesOutAtTheStepItStoppedIn) {
  net::io_context io;
  tcp::acceptor acceptor(io, {net::ip::make_address("127.0.0.1"), 0});
  std::atomic<bool> done{false};
  std::thread silent([&] {
    tcp::socket held = acceptor.accept();
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  kw::http::Client client("http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()), "",
                          std::chrono::milliseconds(500));
  const auto started = std::chrono::steady_clock::now();
  try {
    client.get("/x");
    ADD_FAILURE() << "answered";
  } catch (const kw::http::ConnectionError& error) {
    EXPECT_EQ(error.step(), "read the answer") << error.what();
    EXPECT_TRUE(error.timed_out()) << error.what();
  }
  const auto waited = std::chrono::steady_clock::now() - started;
  done = true;
  silent.join();
  EXPECT_GE(waited, std::chrono::milliseconds(450));
  EXPECT_LT(waited, std::chrono::seconds(3));
}

// Addresses the caller's rule refuses are never connected to.
TEST(HttpClientTimeoutTest, AnAddressTheRuleRefusesIsNotConnectedTo) {
  net::io_context io;
  tcp::acceptor acceptor(io, {net::ip::make_address("127.0.0.1"), 0});
  kw::http::ClientOptions options;
  options.may_connect = [](const net::ip::address& address) { return !address.is_loopback(); };
  kw::http::Client client("http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()), "",
                          options);
  try {
    client.get("/x");
    ADD_FAILURE() << "answered";
  } catch (const kw::http::ConnectionError& error) {
    EXPECT_EQ(error.step(), "refused") << error.what();
  }
  acceptor.non_blocking(true);
  boost::system::error_code ec;
  tcp::socket accepted = acceptor.accept(ec);
  EXPECT_EQ(ec, net::error::would_block) << "a connection was made";
}

TEST(HttpClientUrlTest, AnUnsupportedSchemeIsNamed) {
  try {
    kw::http::Client client("ftp://example.com");
    FAIL() << "ftp:// was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("ftp://example.com"), std::string::npos) << error.what();
  }
}

}  // namespace
