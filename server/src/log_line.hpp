// One line of kw-server's log on stderr, written with one write(2) when the
// statement ends: lines that threads log at once (the PostgreSQL supervisor,
// the change feed, the pools) never break into each other mid-line, as
// several `std::cerr <<` pieces do.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <ostream>
#include <sstream>
#include <string>

namespace kw::server {

class LogLine {
 public:
  LogLine() = default;
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  ~LogLine() {
    const std::string line = text_.str();
    for (std::size_t done = 0; done < line.size();) {
      const ssize_t written = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) return;  // stderr is gone: nothing else to tell it to
      done += static_cast<std::size_t>(written);
    }
  }

  template <typename T>
  LogLine& operator<<(const T& value) {
    text_ << value;
    return *this;
  }
  LogLine& operator<<(std::ostream& (*manipulator)(std::ostream&)) {  // std::endl
    manipulator(text_);
    return *this;
  }

 private:
  std::ostringstream text_;
};

}  // namespace kw::server
