#include "cli/python_hints.hpp"

#include <algorithm>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

namespace kw::agent {

namespace {

std::size_t line_of(const std::string& text, std::size_t offset) {
  return static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<long>(offset), '\n')) +
         1;
}

// The body of the top-level function that starts at `start`: up to the next
// line that begins at column 0 with code.
std::string function_body(const std::string& text, std::size_t start) {
  std::size_t end = text.find('\n', start);
  while (end != std::string::npos && end + 1 < text.size()) {
    const char next = text[end + 1];
    if (next != ' ' && next != '\t' && next != '\n' && next != '#' && next != ')') break;
    end = text.find('\n', end + 1);
  }
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// The first top-level function of `text` whose body launches `kernel`.
std::optional<std::string> launcher_of(const std::string& text, const std::string& kernel,
                                       std::string& body) {
  static const std::regex def(R"((^|\n)def\s+([A-Za-z_]\w*)\s*\()");
  const std::regex launch("\\b" + kernel + R"(\s*\[)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), def); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[2];
    if (name == kernel) continue;
    body = function_body(text, static_cast<std::size_t>(it->position(2)));
    if (std::regex_search(body, launch)) return name;
  }
  return std::nullopt;
}

bool made_from_torch_alone(const std::string& expression) {
  static const std::set<std::string> known = {"torch", "True", "False", "None", "int", "float"};
  const std::vector<std::string> names = free_identifiers(expression);
  return std::all_of(names.begin(), names.end(), [](const std::string& n) { return known.contains(n); });
}

struct Caller {
  const PythonFile* file = nullptr;
  std::size_t offset = 0;
  std::string arguments;
};

// Where the repository calls `launcher` with plain arguments, a test's or
// benchmark's call first.
std::optional<Caller> caller_of(const std::string& launcher, const std::vector<PythonFile>& files) {
  const std::regex call("(^|[^\\w.])(?:[A-Za-z_][\\w.]*\\.)?" + launcher + R"(\(([^()\n]*)\))");
  std::optional<Caller> any;
  for (const PythonFile& file : files) {
    for (auto it = std::sregex_iterator(file.text.begin(), file.text.end(), call);
         it != std::sregex_iterator(); ++it) {
      const auto at = static_cast<std::size_t>(it->position(0));
      const std::size_t line_start = file.text.rfind('\n', at) + 1;
      if (file.text.compare(line_start, 4, "def ") == 0 || (*it)[2].str().empty()) continue;
      Caller found{&file, at, (*it)[2]};
      if (file.path.find("test") != std::string::npos || file.path.find("bench") != std::string::npos)
        return found;
      if (!any) any = found;
      break;
    }
  }
  return any;
}

// The value a caller's file gives `name` last before `offset` (name = EXPR).
std::optional<std::string> assignment_before(const std::string& text, std::size_t offset,
                                             const std::string& name) {
  const std::regex assigned("(^|\\n)[ \\t]*" + name + R"(\s*=\s*([^\n=][^\n]*))");
  std::optional<std::string> last;
  for (auto it = std::sregex_iterator(text.begin(), text.begin() + static_cast<long>(offset), assigned);
       it != std::sregex_iterator(); ++it)
    last = (*it)[2];
  return last;
}

std::vector<std::string> split_arguments(const std::string& arguments) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(arguments);
  while (std::getline(in, part, ',')) {
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// The launcher's call with the caller's arguments: a name the caller built
// from torch alone becomes an input of setup(); another stays for the user.
void use_caller(const Caller& caller, const std::string& callee, CaseHints& hints) {
  static const std::regex identifier(R"(^[A-Za-z_]\w*$)");
  std::string arguments;
  bool complete = true;
  for (const std::string& argument : split_arguments(caller.arguments)) {
    std::string passed = argument;
    const std::size_t equals = argument.find('=');
    const std::string value = equals == std::string::npos ? argument : argument.substr(equals + 1);
    const std::string key = equals == std::string::npos ? "" : argument.substr(0, equals + 1);
    if (std::regex_match(value, identifier) && value != "True" && value != "False" && value != "None") {
      const std::optional<std::string> made = assignment_before(caller.file->text, caller.offset, value);
      if (made && made_from_torch_alone(*made)) {
        hints.setup.push_back("self." + value + " = " + *made);
      } else {
        complete = false;
        hints.setup.push_back("# TODO: self." + value + " (" + caller.file->path + " passes " + value + ")");
      }
      passed = key + "self." + value;
    } else if (!made_from_torch_alone(value)) {
      complete = false;
    }
    arguments += (arguments.empty() ? "" : ", ") + passed;
  }
  hints.call = callee + "(" + arguments + ")";
  hints.call_note = "as " + caller.file->path + ":" +
                    std::to_string(line_of(caller.file->text, caller.offset)) + " calls it";
  hints.setup_complete = complete;
}

// Triton runs num_warps warps a program (4 unless the launch says): the
// block is 32 threads a warp. Several values in the launcher: no fixed block.
void block_of(const std::string& launch_text, const std::string& where, bool autotuned, CaseHints& hints) {
  if (autotuned) {
    hints.block = "None";
    hints.block_note = "@triton.autotune picks num_warps";
    return;
  }
  static const std::regex warps(R"(num_warps\s*=\s*(\d+))");
  std::set<int> values;
  for (auto it = std::sregex_iterator(launch_text.begin(), launch_text.end(), warps);
       it != std::sregex_iterator(); ++it)
    values.insert(std::stoi((*it)[1]));
  if (values.empty()) {
    hints.block_note = "Triton's default num_warps=4: 128 threads";
  } else if (values.size() == 1) {
    hints.block = "(" + std::to_string(32 * *values.begin()) + ", 1, 1)";
    hints.block_note = "num_warps = " + std::to_string(*values.begin()) + " in " + where;
  } else {
    hints.block = "None";
    std::string listed;
    for (int v : values) listed += (listed.empty() ? "" : " or ") + std::to_string(v);
    hints.block_note = where + " sets num_warps to " + listed + " by shape";
  }
}

}  // namespace

std::vector<std::string> free_identifiers(const std::string& expression) {
  static const std::regex strings(R"re("[^"\n]*"|'[^'\n]*')re");
  static const std::regex word(R"(([A-Za-z_]\w*)(\s*=(?!=))?)");
  const std::string bare = std::regex_replace(expression, strings, "\"\"");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(bare.begin(), bare.end(), word); it != std::sregex_iterator(); ++it) {
    const auto at = static_cast<std::size_t>(it->position(0));
    if ((*it)[2].matched || (at > 0 && bare[at - 1] == '.')) continue;
    names.push_back((*it)[1]);
  }
  return names;
}

std::optional<std::pair<const PythonFile*, std::string>> reference_of(const std::string& stem,
                                                                      const std::vector<PythonFile>& files) {
  static const std::regex def(
      R"((^|\n)def\s+((naive_|ref_|reference_|torch_)?(\w+?)(_ref|_reference)?)\s*\()");
  if (stem.empty()) return std::nullopt;
  for (const PythonFile& file : files) {
    for (auto it = std::sregex_iterator(file.text.begin(), file.text.end(), def);
         it != std::sregex_iterator(); ++it) {
      if (!(*it)[3].matched && !(*it)[5].matched) continue;  // no reference's name
      const std::string core = (*it)[4];
      if (stem.find(core) != std::string::npos || core.find(stem) != std::string::npos)
        return std::make_pair(&file, (*it)[2].str());
    }
  }
  return std::nullopt;
}

CaseHints triton_case_hints(const PythonFile& file, const std::string& kernel,
                            const std::vector<PythonFile>& files) {
  CaseHints hints;
  hints.call = file.module + "." + kernel + "[(1,)]()";
  const std::regex autotune(R"(@triton\.autotune[^\n]*\n(?:@[^\n]*\n|[ \t)][^\n]*\n)*def\s+)" + kernel +
                            "\\b");
  const bool autotuned = std::regex_search(file.text, autotune);
  std::string body;
  const std::optional<std::string> launcher = launcher_of(file.text, kernel, body);
  std::string stem = kernel;
  if (stem.size() > 7 && stem.compare(stem.size() - 7, 7, "_kernel") == 0) stem.resize(stem.size() - 7);
  if (launcher) {
    hints.call = file.module + "." + *launcher + "()";
    hints.call_note = "the launcher " + *launcher + "() of " + file.path + " calls the kernel";
    if (std::optional<Caller> caller = caller_of(*launcher, files))
      use_caller(*caller, file.module + "." + *launcher, hints);
    block_of(body, *launcher + "()", autotuned, hints);
  } else {
    block_of("", file.path, autotuned, hints);
  }
  if (auto reference = reference_of(stem, files)) {
    const auto& [where, name] = *reference;
    hints.modules.push_back(where->module);
    const std::string arguments =
        hints.call.substr(hints.call.find('(') + 1, hints.call.rfind(')') - hints.call.find('(') - 1);
    if (launcher && hints.setup_complete) {
      hints.reference = where->module + "." + name + "(" + arguments + ")";
      hints.reference_note = "the repository's own " + name + " (" + where->path + "), on the same inputs";
    } else {
      hints.reference_note = "the repository has " + name + " (" + where->path + "): e.g. return " +
                             where->module + "." + name + "(...)";
    }
  }
  return hints;
}

std::vector<std::string> import_side_effects(const PythonFile& file) {
  static const std::regex statement(R"((^|\n)((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*\([^\n]*))");
  static const std::set<std::string> harmless = {"print", "setattr", "warnings.filterwarnings",
                                                 "torch.manual_seed", "logging.basicConfig"};
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(file.text.begin(), file.text.end(), statement);
       it != std::sregex_iterator(); ++it) {
    const std::string call = (*it)[2];
    const std::string callee = call.substr(0, call.find('('));
    if (harmless.contains(callee)) continue;
    found.push_back(file.path + ":" +
                    std::to_string(line_of(file.text, static_cast<std::size_t>(it->position(2)))) +
                    " runs `" + (call.size() > 60 ? call.substr(0, 57) + "..." : call) + "`");
  }
  return found;
}

}  // namespace kw::agent
