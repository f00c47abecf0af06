// A C++ symbol as people read it (kernel names from CUPTI and cuobjdump);
// the name itself when it is not a mangled one.
#pragma once

#include <cxxabi.h>

#include <cstdlib>
#include <string>

namespace kw::common {

inline std::string demangle(const char* name) {
  if (name == nullptr) return "<unnamed>";
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && text != nullptr ? text : name;
  std::free(text);
  return out;
}

}  // namespace kw::common
