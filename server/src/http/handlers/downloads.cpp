#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "kw/common/sha256.hpp"
#include "kwbench_py.hpp"

namespace kw::server {

namespace {

struct Binary {
  std::shared_ptr<const std::string> content;  // every download is sent from this one copy
  std::string sha256;
};

// The file is read again only when its size or modification time changed, so
// a kw rebuilt beside a running server is what the next CI job gets.
class BinaryFile {
 public:
  explicit BinaryFile(std::string path) : path_(std::move(path)) {}

  std::shared_ptr<const Binary> get() {
    struct stat info {};
    if (path_.empty() || ::stat(path_.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
      throw NotFound("kw_unavailable", path_.empty()
                                           ? "this kw-server serves no kw binary (start it with --kw-binary)"
                                           : "this kw-server serves kw from " + path_ + ", which is missing");
    }
    std::lock_guard lock(mutex_);
    if (!binary_ || info.st_size != size_ || info.st_mtim.tv_sec != mtime_.tv_sec ||
        info.st_mtim.tv_nsec != mtime_.tv_nsec) {
      std::ifstream in(path_, std::ios::binary);
      std::stringstream content;
      content << in.rdbuf();
      if (!in) throw ServiceUnavailable("kw_unavailable", "cannot read " + path_);
      auto binary = std::make_shared<Binary>();
      binary->content = std::make_shared<const std::string>(content.str());
      binary->sha256 = common::sha256_hex(*binary->content);
      binary_ = std::move(binary);
      size_ = info.st_size;
      mtime_ = info.st_mtim;
    }
    return binary_;
  }

 private:
  std::string path_;
  std::mutex mutex_;
  std::shared_ptr<const Binary> binary_;
  off_t size_ = 0;
  timespec mtime_{};
};

}  // namespace

void add_download_routes(Router& router, const std::string& kw_binary) {
  auto file = std::make_shared<BinaryFile>(kw_binary);
  router.add("GET", "/download/kw", Access::read(), [file](Request&) {
    auto binary = file->get();
    Response response;
    response.content_type = "application/octet-stream";
    response.shared_body = binary->content;
    response.headers.emplace_back("Content-Disposition", "attachment; filename=\"kw\"");
    response.headers.emplace_back("X-Kw-Sha256", binary->sha256);
    response.headers.emplace_back("X-Kw-Platform", KW_PLATFORM);
    response.headers.emplace_back("Cache-Control", "no-cache");
    return response;
  });
  // The python harness this server's kw carries, for a bench run where kw
  // is not installed (the agent puts its own copy on the bench's PYTHONPATH).
  router.add("GET", "/download/kwbench.py", Access::read(), [](Request&) {
    Response response;
    response.content_type = "text/x-python; charset=utf-8";
    response.body = std::string(kKwbenchPy);
    response.headers.emplace_back("Content-Disposition", "attachment; filename=\"kwbench.py\"");
    response.headers.emplace_back("Cache-Control", "no-cache");
    return response;
  });
  // For `sha256sum -c`: the line it expects for a file saved as ./kw.
  router.add("GET", "/download/kw.sha256", Access::read(), [file](Request&) {
    Response response;
    response.content_type = "text/plain; charset=utf-8";
    response.body = file->get()->sha256 + "  kw\n";
    response.headers.emplace_back("Cache-Control", "no-cache");
    return response;
  });
}

}  // namespace kw::server
