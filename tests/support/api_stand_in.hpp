// A TEST DOUBLE for the GitHub and GitLab REST APIs (there is no internet
// here): a plain HTTP server on a loopback port that keeps the comments of
// one pull or merge request the way those APIs do (list a page, create, edit
// by id) and records every request.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "loopback_acceptor.hpp"

namespace kw::testing {

class CommentApiStandIn {
 public:
  struct Recorded {
    std::string method, target, body;
    std::map<std::string, std::string> headers;  // lower-case names
  };

  // `thread`: the comments' collection path, e.g. "/repos/acme/kernels/issues/7/comments"
  // (GitHub) or "/projects/42/merge_requests/7/notes" (GitLab); `item`: the
  // prefix of one comment's path ("/repos/acme/kernels/issues/comments/" or
  // the collection path and "/"); `edit`: PATCH (GitHub) or PUT (GitLab).
  CommentApiStandIn(std::string thread, std::string item, std::string edit)
      : thread_(std::move(thread)), item_(std::move(item)), edit_(std::move(edit)) {
    thread_runner_ = std::thread([this] { serve(); });
  }
  ~CommentApiStandIn() {
    listener_.close();
    thread_runner_.join();
  }

  std::string url() const { return listener_.url(); }
  void add_comment(const std::string& body) {
    std::lock_guard lock(mutex_);
    comments_[next_id_++] = body;
  }
  // Answers this status to every request from now on (a token without rights).
  void refuse(int status) { refuse_ = status; }
  std::map<long, std::string> comments() {
    std::lock_guard lock(mutex_);
    return comments_;
  }
  std::vector<Recorded> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  void serve() {
    namespace bhttp = boost::beast::http;
    while (auto accepted = listener_.accept()) {
      boost::asio::ip::tcp::socket& socket = *accepted;
      boost::system::error_code ec;
      boost::beast::flat_buffer buffer;
      for (;;) {
        bhttp::request<bhttp::string_body> request;
        bhttp::read(socket, buffer, request, ec);
        if (ec) break;
        Response response = answer(request);
        response.keep_alive(request.keep_alive());
        response.prepare_payload();
        bhttp::write(socket, response, ec);
        if (ec || !request.keep_alive()) break;
      }
      socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    }
  }

  Response answer(const boost::beast::http::request<boost::beast::http::string_body>& request) {
    namespace bhttp = boost::beast::http;
    std::lock_guard lock(mutex_);
    Recorded recorded{
        std::string(request.method_string()), std::string(request.target()), request.body(), {}};
    for (const auto& field : request) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      recorded.headers[name] = std::string(field.value());
    }
    requests_.push_back(recorded);
    auto reply = [](int status, const nlohmann::json& body) {
      Response response(static_cast<bhttp::status>(status), 11);
      response.set(bhttp::field::content_type, "application/json");
      response.body() = body.dump();
      return response;
    };
    if (refuse_ != 0) return reply(refuse_, {{"message", "stand-in: refused on purpose"}});
    const std::string target = recorded.target, path = target.substr(0, target.find('?'));
    if (recorded.method == "GET" && path == thread_) {
      // Pages of `per_page` comments in creation order, as both APIs list them.
      std::smatch page_match, size_match;
      int page = std::regex_search(target, page_match, std::regex(R"([?&]page=([0-9]+))"))
                     ? std::stoi(page_match[1])
                     : 1;
      int per_page = std::regex_search(target, size_match, std::regex(R"([?&]per_page=([0-9]+))"))
                         ? std::stoi(size_match[1])
                         : 30;
      nlohmann::json list = nlohmann::json::array();
      int index = 0;
      for (const auto& [id, body] : comments_) {
        if (index / per_page == page - 1) list.push_back({{"id", id}, {"body", body}});
        ++index;
      }
      return reply(200, list);
    }
    std::string body;
    try {
      body = nlohmann::json::parse(recorded.body).at("body").get<std::string>();
    } catch (const std::exception&) {
      return reply(400, {{"message", "stand-in: body must be {\"body\": string}"}});
    }
    if (recorded.method == "POST" && path == thread_) {
      long id = next_id_++;
      comments_[id] = body;
      return reply(201, {{"id", id}, {"body", body}});
    }
    if (recorded.method == edit_ && path.rfind(item_, 0) == 0) {
      long id = std::stol(path.substr(item_.size()));
      if (!comments_.contains(id)) return reply(404, {{"message", "stand-in: no such comment"}});
      comments_[id] = body;
      return reply(200, {{"id", id}, {"body", body}});
    }
    return reply(404, {{"message", "stand-in: no route " + recorded.method + " " + path}});
  }

  std::string thread_, item_, edit_;
  LoopbackAcceptor listener_;
  std::thread thread_runner_;
  std::atomic<int> refuse_{0};
  std::mutex mutex_;
  std::map<long, std::string> comments_;
  long next_id_ = 1001;
  std::vector<Recorded> requests_;
};

}  // namespace kw::testing
