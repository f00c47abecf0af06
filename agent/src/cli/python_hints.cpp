#include "cli/python_hints.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>

#include "cli/init_files.hpp"

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

// Made from torch, literals and `bound` (a test's parameters) alone.
bool made_from_torch_alone(const std::string& expression, const std::vector<std::string>& bound = {}) {
  static const std::set<std::string> known = {"torch", "True", "False", "None", "int", "float"};
  const std::vector<std::string> names = free_identifiers(expression);
  return std::all_of(names.begin(), names.end(), [&](const std::string& n) {
    return known.contains(n) || std::find(bound.begin(), bound.end(), n) != bound.end();
  });
}

bool mentions(const std::string& expression, const std::string& name) {
  const std::vector<std::string> names = free_identifiers(expression);
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The text from `open` (a bracket) to its match, strings skipped; npos when
// it does not close.
std::size_t closing_bracket(const std::string& text, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"' || c == '\'') {
      const std::size_t end = text.find(c, i + 1);
      if (end == std::string::npos) return end;
      i = end;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && --depth == 0) {
      return i;
    }
  }
  return std::string::npos;
}

// `text` split at its commas outside brackets and strings, each part trimmed.
std::vector<std::string> top_level_parts(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() &&
        (text[i] == '(' || text[i] == '[' || text[i] == '{' || text[i] == '"' || text[i] == '\'')) {
      const std::size_t end =
          text[i] == '"' || text[i] == '\'' ? text.find(text[i], i + 1) : closing_bracket(text, i);
      if (end == std::string::npos) break;
      i = end;
      continue;
    }
    if (i < text.size() && text[i] != ',') continue;
    std::string part = text.substr(start, i - start);
    part.erase(0, part.find_first_not_of(" \t\n"));
    part.erase(part.find_last_not_of(" \t\n") + 1);
    if (!part.empty()) parts.push_back(part);
    start = i + 1;
  }
  return parts;
}

// One @pytest.mark.parametrize("a, b", [(1, 2), ...]) from its '(': the
// names and a row of literal values a combination; nullopt where a value is
// no literal.
std::optional<Parametrized> one_parametrize(const std::string& text, std::size_t open) {
  const std::size_t close = closing_bracket(text, open);
  if (close == std::string::npos) return std::nullopt;
  const std::vector<std::string> arguments = top_level_parts(text.substr(open + 1, close - open - 1));
  if (arguments.size() < 2 || arguments[0].size() < 2 ||
      (arguments[0][0] != '"' && arguments[0][0] != '\'') ||
      (arguments[1][0] != '[' && arguments[1][0] != '('))
    return std::nullopt;
  Parametrized found;
  found.names = top_level_parts(arguments[0].substr(1, arguments[0].size() - 2));
  for (const std::string& item : top_level_parts(arguments[1].substr(1, arguments[1].size() - 2))) {
    std::vector<std::string> row = {item};
    if (found.names.size() > 1) {
      if (item.front() != '(' && item.front() != '[') return std::nullopt;
      row = top_level_parts(item.substr(1, item.size() - 2));
    }
    if (row.size() != found.names.size()) return std::nullopt;
    for (const std::string& value : row)
      if (!made_from_torch_alone(value)) return std::nullopt;
    found.rows.push_back(row);
  }
  if (found.rows.empty()) return std::nullopt;
  return found;
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
    if (file.text.find(launcher + "(") == std::string::npos) continue;  // the regex only where it can match
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

// The value a caller's file gives `name` last before `offset` (name = EXPR),
// on one line: an expression whose brackets span lines is joined.
std::optional<std::string> assignment_before(const std::string& text, std::size_t offset,
                                             const std::string& name) {
  const std::regex assigned("(^|\\n)[ \\t]*" + name + R"(\s*=\s*([^\n=][^\n]*))");
  std::optional<std::size_t> last;
  for (auto it = std::sregex_iterator(text.begin(), text.begin() + static_cast<long>(offset), assigned);
       it != std::sregex_iterator(); ++it)
    last = static_cast<std::size_t>(it->position(2));
  if (!last) return std::nullopt;
  std::string expression;
  int depth = 0;
  for (std::size_t i = *last; i < offset; ++i) {
    const char c = text[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == '\n') {
      if (depth <= 0) break;
      i = text.find_first_not_of(" \t", i + 1) - 1;  // the next line's indentation is one space
      expression += ' ';
      continue;
    }
    expression += c;
  }
  if (depth > 0) return std::nullopt;  // not closed before the call
  return expression;
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

// A test parametrized over more shapes than this gives its first ones.
constexpr std::size_t kMaxShapeCases = 8;

// The caller's parameters that `used` (its inputs) mention become the
// cases' params: a case a distinct row, and setup() binds them first.
void use_parameters(const Parametrized& shapes, const std::string& where, const std::string& used,
                    CaseHints& hints) {
  std::vector<std::size_t> columns;
  for (std::size_t i = 0; i < shapes.names.size(); ++i)
    if (mentions(used, shapes.names[i])) columns.push_back(i);
  if (columns.empty()) return;
  std::set<std::vector<std::string>> seen;
  for (const auto& row : shapes.rows) {
    std::vector<std::string> projected;
    for (std::size_t i : columns) projected.push_back(row[i]);
    if (seen.insert(projected).second) hints.param_rows.push_back(projected);
  }
  std::vector<std::string> binding;
  for (std::size_t i : columns) {
    hints.param_names.push_back(shapes.names[i]);
    binding.push_back(shapes.names[i] + " = self.params[\"" + shapes.names[i] + "\"]");
  }
  hints.setup.insert(hints.setup.begin(), binding.begin(), binding.end());
  hints.params_note = "the shapes of " + shapes.function + "'s @pytest.mark.parametrize (" + where + ")";
}

// The launcher's call with the caller's arguments: a name the caller built
// from torch alone (and the test's parameters) becomes an input of setup();
// another stays for the user.
void use_caller(const Caller& caller, const std::string& callee, CaseHints& hints) {
  static const std::regex identifier(R"(^[A-Za-z_]\w*$)");
  const Parametrized shapes = parametrized_at(caller.file->text, caller.offset, kMaxShapeCases);
  std::string arguments, inputs;
  bool complete = true;
  for (const std::string& argument : split_arguments(caller.arguments)) {
    std::string passed = argument;
    const std::size_t equals = argument.find('=');
    const std::string value = equals == std::string::npos ? argument : argument.substr(equals + 1);
    const std::string key = equals == std::string::npos ? "" : argument.substr(0, equals + 1);
    if (std::regex_match(value, identifier) && value != "True" && value != "False" && value != "None") {
      const std::optional<std::string> made = assignment_before(caller.file->text, caller.offset, value);
      if (made && made_from_torch_alone(*made, shapes.names)) {
        hints.setup.push_back("self." + value + " = " + *made);
        inputs += *made + ";";
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
  use_parameters(shapes, caller.file->path, inputs, hints);
}

// Triton runs num_warps warps a program (4 unless the launch says): the
// block is 32 threads a warp. Several values in the launcher: no fixed
// block. A value the launcher computes (a helper's answer, an expression) is
// not followed: the block is said to be unknown, never guessed.
void block_of(const std::string& launch_text, const std::string& where, bool autotuned, CaseHints& hints) {
  if (autotuned) {
    hints.block = "None";
    hints.block_note = "@triton.autotune picks num_warps";
    return;
  }
  static const std::regex warps(R"(\bnum_warps\s*=(?!=)\s*)");
  std::set<int> values;
  std::string computed;
  for (auto it = std::sregex_iterator(launch_text.begin(), launch_text.end(), warps);
       it != std::sregex_iterator(); ++it) {
    // The value: up to a comma, a closing bracket or the line's end outside brackets.
    std::string value;
    int depth = 0;
    for (std::size_t i = static_cast<std::size_t>(it->position(0) + it->length(0)); i < launch_text.size();
         ++i) {
      const char c = launch_text[i];
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      if (depth < 0 || c == '\n' || c == '#' || (c == ',' && depth == 0)) break;
      value += c;
    }
    value.erase(value.find_last_not_of(" \t\r") + 1);
    if (!value.empty() &&
        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      values.insert(std::stoi(value));
    else if (value != "num_warps" && computed.empty())
      computed = value;  // `num_warps=num_warps` passes on what is set elsewhere
  }
  if (!computed.empty()) {
    hints.block = "None";
    hints.block_note = where + " sets num_warps to `" + computed +
                       "`, which kw init does not follow: the block is unknown (TODO: write it out)";
  } else if (values.empty()) {
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

// How many values a launcher's body returns at its first `return a, b`
// (a tuple); 1 where it returns one value or none is found.
std::size_t returned_values(const std::string& body) {
  static const std::regex returned(R"(\n[ \t]+return[ \t]+([^\n]*))");
  std::smatch found;
  if (!std::regex_search(body, found, returned)) return 1;
  std::string value = found[1];
  value.erase(value.find_last_not_of(" \t\r") + 1);
  // `return (a, b)`: the tuple's parentheses around the whole value.
  if (!value.empty() && value.front() == '(' && closing_bracket(value, 0) == value.size() - 1)
    value = value.substr(1, value.size() - 2);
  return std::max<std::size_t>(1, top_level_parts(value).size());
}

}  // namespace

Parametrized parametrized_at(const std::string& text, std::size_t offset, std::size_t limit) {
  static const std::regex def(R"((^|\n)def\s+([A-Za-z_]\w*))");
  static const std::regex decorator(R"(@pytest\.mark\.parametrize\s*\()");
  Parametrized all;
  std::size_t def_at = std::string::npos;
  for (auto it = std::sregex_iterator(text.begin(), text.begin() + static_cast<long>(offset), def);
       it != std::sregex_iterator(); ++it) {
    def_at = static_cast<std::size_t>(it->position(2));
    all.function = (*it)[2];
  }
  if (def_at == std::string::npos) return all;
  // The decorators: the lines above the def that belong to it.
  std::size_t top = text.rfind('\n', def_at);
  while (top != std::string::npos && top > 0) {
    const std::size_t previous = text.rfind('\n', top - 1);
    const std::size_t line = previous == std::string::npos ? 0 : previous + 1;
    const char first = text[line];
    if (first != '@' && first != ' ' && first != '\t' && first != ')' && first != ']' && first != '\n') break;
    top = previous;
  }
  const std::size_t from = top == std::string::npos ? 0 : top;
  all.rows = {{}};
  for (auto it = std::sregex_iterator(text.begin() + static_cast<long>(from),
                                      text.begin() + static_cast<long>(def_at), decorator);
       it != std::sregex_iterator(); ++it) {
    const std::size_t open = from + static_cast<std::size_t>(it->position(0) + it->length(0)) - 1;
    const std::optional<Parametrized> one = one_parametrize(text, open);
    if (!one) continue;
    std::vector<std::vector<std::string>> product;
    for (const auto& row : all.rows) {
      for (const auto& values : one->rows) {
        if (product.size() == limit) break;
        std::vector<std::string> combined = row;
        combined.insert(combined.end(), values.begin(), values.end());
        product.push_back(std::move(combined));
      }
    }
    all.names.insert(all.names.end(), one->names.begin(), one->names.end());
    all.rows = std::move(product);
  }
  if (all.names.empty()) all.rows.clear();
  return all;
}

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
  // Read line by line, not with a regex over each file: kw init asks this
  // for every kernel of the repository, over every file (hundreds of each).
  static constexpr std::string_view kPrefixes[] = {"naive_", "ref_", "reference_", "torch_"};
  static constexpr std::string_view kSuffixes[] = {"_ref", "_reference"};
  if (stem.empty()) return std::nullopt;
  for (const PythonFile& file : files) {
    const std::string& text = file.text;
    for (std::size_t at = text.rfind("def ", 0) == 0 ? 0 : text.find("\ndef "); at != std::string::npos;
         at = text.find("\ndef ", at + 1)) {
      std::size_t begin = text.find_first_not_of(" \t", at + (text[at] == '\n' ? 5 : 4));
      if (begin == std::string::npos) break;
      std::size_t end = begin;
      while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_'))
        ++end;
      const std::size_t paren = text.find_first_not_of(" \t", end);
      if (end == begin || paren == std::string::npos || text[paren] != '(') continue;
      const std::string name = text.substr(begin, end - begin);
      std::string_view core(name);
      bool named_as_reference = false;
      for (std::string_view prefix : kPrefixes) {
        if (core.size() > prefix.size() && core.substr(0, prefix.size()) == prefix) {
          core.remove_prefix(prefix.size());
          named_as_reference = true;
          break;
        }
      }
      for (std::string_view suffix : kSuffixes) {
        if (core.size() > suffix.size() && core.substr(core.size() - suffix.size()) == suffix) {
          core.remove_suffix(suffix.size());
          named_as_reference = true;
          break;
        }
      }
      if (!named_as_reference) continue;
      if (stem.find(core) != std::string::npos || core.find(stem) != std::string::npos)
        return std::make_pair(&file, name);
    }
  }
  return std::nullopt;
}

namespace {

// How many positional arguments `def name(...)` in `text` takes: its
// parameters without a default at least, all before `*` at most (no bound
// with *args). nullopt where the def is not found whole.
std::optional<std::pair<std::size_t, std::size_t>> positional_arguments(const std::string& text,
                                                                        const std::string& name) {
  const std::regex def("(^|\n)def\\s+" + name + "\\s*\\(");
  std::smatch found;
  if (!std::regex_search(text, found, def)) return std::nullopt;
  const std::size_t open = static_cast<std::size_t>(found.position(0) + found.length(0)) - 1;
  const std::size_t close = closing_bracket(text, open);
  if (close == std::string::npos) return std::nullopt;
  std::size_t required = 0, most = 0;
  for (const std::string& parameter : top_level_parts(text.substr(open + 1, close - open - 1))) {
    if (parameter == "self" || parameter.rfind("**", 0) == 0) continue;
    if (parameter == "/") continue;
    if (parameter[0] == '*') {
      if (parameter != "*") most = std::numeric_limits<std::size_t>::max();  // *args
      break;
    }
    ++most;
    if (parameter.find('=') == std::string::npos) ++required;
  }
  return std::make_pair(required, most);
}

}  // namespace

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
    if (const std::size_t returned = returned_values(body); returned > 1) {
      hints.call += "[0]";
      hints.call_note += "; it returns " + std::to_string(returned) +
                         " values, the first compared with the reference (TODO: the one that is the output)";
    }
  } else {
    block_of("", file.path, autotuned, hints);
  }
  if (auto reference = reference_of(stem, files)) {
    const auto& [where, name] = *reference;
    const std::string arguments =
        hints.call.substr(hints.call.find('(') + 1, hints.call.rfind(')') - hints.call.find('(') - 1);
    // Held to the launcher's call only where it takes as many arguments.
    const std::size_t passed = top_level_parts(arguments).size();
    const auto takes = positional_arguments(where->text, name);
    if (launcher && hints.setup_complete && takes && (passed < takes->first || passed > takes->second)) {
      hints.reference_note = "the repository has " + name + " (" + where->path + "), which takes " +
                             (takes->first == takes->second ? std::to_string(takes->first)
                              : takes->second == std::numeric_limits<std::size_t>::max()
                                  ? std::to_string(takes->first) + " or more"
                                  : std::to_string(takes->first) + " to " + std::to_string(takes->second)) +
                             " argument(s) where the call passes " + std::to_string(passed) + ": not used";
      return hints;
    }
    hints.modules.push_back(where->module);
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

std::string code_only(const std::string& text) {
  std::string out = text;
  std::size_t i = 0;
  auto blank = [&](std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to && k < out.size(); ++k) {
      if (out[k] != '\n') out[k] = ' ';
    }
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '#') {
      const std::size_t end = std::min(text.find('\n', i), text.size());
      blank(i, end);
      i = end;
    } else if (c == '"' || c == '\'') {
      const std::string quote =
          text.compare(i, 3, std::string(3, c)) == 0 ? std::string(3, c) : std::string(1, c);
      std::size_t end = i + quote.size();
      while (end < text.size() && text.compare(end, quote.size(), quote) != 0 &&
             (quote.size() == 3 || text[end] != '\n'))
        end += text[end] == '\\' ? 2 : 1;
      end = std::min(end + quote.size(), text.size());
      blank(i + quote.size(), end - quote.size());
      i = end;
    } else {
      ++i;
    }
  }
  return out;
}

std::set<std::string> perf_report_wrappers(const std::vector<PythonFile>& files) {
  static const std::regex def(R"(def\s+(\w+)\s*\()");
  static const std::regex returns(R"([ \t]+return\s+(?:[\w.]+\.)?perf_report\s*\()");
  std::set<std::string> out;
  for (const PythonFile& file : files) {
    if (file.text.find("perf_report") == std::string::npos) continue;
    std::istringstream lines(file.code);
    std::string line, function;  // the top-level function the line is in
    while (std::getline(lines, line)) {
      std::smatch name;
      if (std::regex_search(line, name, def, std::regex_constants::match_continuous))
        function = name[1];
      else if (!line.empty() && line[0] != ' ' && line[0] != '\t' &&
               line.find_first_not_of(" \t\r") != std::string::npos)
        function.clear();
      else if (!function.empty() && std::regex_search(line, returns, std::regex_constants::match_continuous))
        out.insert(function);
    }
  }
  return out;
}

bool declares_perf_report(const PythonFile& file, const std::set<std::string>& wrappers) {
  static const std::regex own(R"((?:^|\n)([^\n]*)\bperf_report\s*\()");
  static const std::regex decorator(R"((?:^|\n)[ \t]*@(?:[\w.]+\.)?(\w+)\s*\()");
  const std::string& code = file.code;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), own); it != std::sregex_iterator(); ++it) {
    const std::string before = (*it)[1];
    if (before.find("return") == std::string::npos && before.find("def ") == std::string::npos) return true;
  }
  return std::any_of(std::sregex_iterator(code.begin(), code.end(), decorator), std::sregex_iterator(),
                     [&](const std::smatch& m) { return wrappers.contains(m[1].str()); });
}

namespace {

// Every quoted string of `text` that is a Python identifier.
std::set<std::string> identifier_strings(const std::string& text) {
  static const std::regex quoted(R"(['"]([A-Za-z_]\w*)['"])");
  const std::vector<std::string> found = matches(text, quoted);
  return {found.begin(), found.end()};
}

// The parameters of `file`'s perf_report functions that nothing in `given` names and that have no default.
std::set<std::string> perf_report_ungiven(const PythonFile& file, const std::set<std::string>& wrappers,
                                          const std::set<std::string>& given) {
  // A decorator line, the lines of its call, then the function's `def`.
  static const std::regex decorated(
      R"((?:^|\n)[ \t]*@(?:[\w.]+\.)?(\w+)\s*\([\s\S]*?\n[ \t]*def\s+\w+\s*\()");
  std::set<std::string> ungiven;
  for (auto it = std::sregex_iterator(file.text.begin(), file.text.end(), decorated);
       it != std::sregex_iterator(); ++it) {
    const std::string decorator = (*it)[1];
    if (decorator != "perf_report" && !wrappers.contains(decorator)) continue;
    const std::size_t open = static_cast<std::size_t>(it->position(0) + it->length(0)) - 1;
    const std::size_t close = closing_bracket(file.text, open);
    if (close == std::string::npos) continue;
    for (std::string parameter : top_level_parts(file.text.substr(open + 1, close - open - 1))) {
      if (parameter.find('=') != std::string::npos || parameter[0] == '*') continue;  // a default, *args
      parameter = parameter.substr(0, parameter.find(':'));
      parameter.erase(parameter.find_last_not_of(" \t") + 1);
      if (!given.contains(parameter)) ungiven.insert(parameter);
    }
  }
  return ungiven;
}

}  // namespace

std::string run_args_todo(const std::vector<const PythonFile*>& scripts, const std::vector<PythonFile>& files,
                          const std::set<std::string>& wrappers) {
  std::set<std::string> wrapper_strings;  // a wrapper's line_arg is a string of its module
  for (const PythonFile& file : files) {
    if (!wrappers.empty() && file.text.find("perf_report") != std::string::npos) {
      const std::set<std::string> strings = identifier_strings(file.text);
      wrapper_strings.insert(strings.begin(), strings.end());
    }
  }
  std::map<std::string, int> ungiven;  // parameter -> scripts whose functions take it
  for (const PythonFile* script : scripts) {
    std::set<std::string> given = identifier_strings(script->text);
    given.insert(wrapper_strings.begin(), wrapper_strings.end());
    for (const std::string& parameter : perf_report_ungiven(*script, wrappers, given)) ++ungiven[parameter];
  }
  if (ungiven.empty()) return {};
  std::string names, example;
  for (const auto& [parameter, count] : ungiven) {
    names += (names.empty() ? "" : ", ") + parameter + " (" + std::to_string(count) + " script(s) at least)";
    example += (example.empty() ? "" : ", ") + ("\"" + parameter + "\": \"...\"");
  }
  return "the perf_report functions take " + names +
         ", which their benchmarks do not give (the suite's runner passes them to .run()): set "
         "kernelwatch.json's "
         "run_args, a Python expression each: \"run_args\": {" +
         example + "}";
}

bool runs_as_script(const PythonFile& file) {
  static const std::regex top(
      R"((?:^|\n)(?:if\s+__name__\s*==|for\s|while\s|with\s|(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*\())");
  const std::string& code = file.code;
  return std::regex_search(code, top);
}

std::vector<std::string> import_side_effects(const PythonFile& file) {
  static const std::regex statement(R"((^|\n)((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*\([^\n]*))");
  static const std::set<std::string> harmless = {"print", "setattr", "warnings.filterwarnings",
                                                 "torch.manual_seed", "logging.basicConfig"};
  std::vector<std::string> found;
  const std::string& code = file.code;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), statement); it != std::sregex_iterator();
       ++it) {
    const std::string call = file.text.substr(static_cast<std::size_t>(it->position(2)), (*it)[2].length());
    const std::string callee = call.substr(0, call.find('('));
    if (harmless.contains(callee)) continue;
    found.push_back(file.path + ":" +
                    std::to_string(line_of(file.text, static_cast<std::size_t>(it->position(2)))) +
                    " runs `" + (call.size() > 60 ? call.substr(0, 57) + "..." : call) + "`");
  }
  return found;
}

std::string identifier(std::string text) {
  for (char& c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) text = "_" + text;
  return text;
}

std::string class_name(const std::string& function) {
  std::string out;
  bool upper = true;
  for (char c : function) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out.empty() ? "Case" : out;
}

std::vector<std::pair<std::string, std::string>> case_names(
    const std::vector<std::pair<const PythonFile*, std::string>>& kernels) {
  std::map<std::string, int> named;
  std::set<std::string> classes;
  for (const auto& [file, kernel] : kernels) ++named[kernel];
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [file, kernel] : kernels) {
    const std::string module_stem = file->module.substr(file->module.rfind('.') + 1);
    const bool shared_name = named[kernel] > 1;
    const std::string base = class_name(shared_name ? module_stem + "_" + kernel : kernel);
    std::string case_class = base;
    for (int n = 2; !classes.insert(case_class).second; ++n) case_class = base + std::to_string(n);
    out.emplace_back(case_class,
                     shared_name ? identifier(module_stem) + "/" + identifier(kernel) : identifier(kernel));
  }
  return out;
}

}  // namespace kw::agent
