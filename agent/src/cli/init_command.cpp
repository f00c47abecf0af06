#include "cli/init_command.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/init_cmake.hpp"
#include "cli/init_files.hpp"
#include "cli/python_hints.hpp"
#include "kw/common/subprocess.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The case's class, name and params, and the setup that makes its inputs.
void write_case_setup(std::ostringstream& out, const std::string& klass, const std::string& case_name,
                      const CaseHints& hints, const std::string& what) {
  out << "class " << klass << "(kwbench.Case):\n";
  if (hints.param_names.empty()) {
    out << "    name = \"" << case_name << "\"  # TODO: name the shape, e.g. \"" << case_name
        << "/fp16/n1m\"\n"
        << "    params = {}  # TODO: the shape and dtype, e.g. {\"n\": 1 << 20, \"dtype\": \"fp16\"}\n\n";
  } else {
    // A case a shape of the test: its parameters name it.
    out << "    # A case a shape: " << hints.params_note << ".\n"
        << "    def __init__(self, **params):\n"
        << "        self.params = params\n"
        << "        self.name = \"" << case_name
        << "/\" + \"/\".join(\"%s=%s\" % (k, str(v).replace(\" \", \"\")) for k, v in params.items())\n\n";
  }
  out << "    def setup(self, state):\n";
  if (hints.setup.empty() && hints.setup_complete)
    out << "        pass  # the call passes no input\n";
  else if (hints.setup.empty())
    out << "        # TODO: fresh random inputs on the GPU (never zeros), e.g.\n"
        << "        #   self.x = torch.randn(1 << 20, device=\"cuda\", dtype=torch.float16)\n";
  else
    out << "        # What " << hints.call_note.substr(3, hints.call_note.find(" calls it") - 3)
        << " passes\n";
  for (const std::string& line : hints.setup) out << "        " << line << "\n";
  if (!hints.setup_complete)
    out << "        raise NotImplementedError(\"TODO: make the inputs of " << what << "\")\n";
}

// How the case calls the code under test, and its baselines.
void write_case_calls(std::ostringstream& out, const CaseHints& hints) {
  out << "\n    def run_candidate(self, state):\n"
      << "        # What the call returns is compared with reference(); a call that\n"
      << "        # writes into a buffer instead defines output(state) returning it.\n"
      << "        return " << hints.call
      << (hints.setup_complete
              ? "  # " + hints.call_note
              : "  # TODO: the arguments" + (hints.call_note.empty() ? "" : "; " + hints.call_note))
      << "\n\n"
      << "    def baselines(self):\n"
      << "        # TODO: what the case is measured against, e.g. [\"torch\"]: quick_bench's\n"
      << "        # speedup and the dashboard's speedup chart are against these.\n"
      << (hints.reference.empty()
              ? ""
              : "        # The reference below is one: [\"reference\"], run in run_baseline.\n")
      << "        return []\n\n"
      << "    def run_baseline(self, name, state):\n"
      << "        # TODO: baseline `name` on the same inputs, e.g. for \"torch\" the PyTorch ops\n"
      << "        raise NotImplementedError(\"TODO: baseline \" + name)\n\n";
}

// The case's reference, the launch it must make and its sanity range.
void write_case_checks(std::ostringstream& out, const CaseHints& hints, const std::string& kernel_pattern,
                       const std::string& what) {
  out << "    def reference(self, state):\n";
  if (!hints.reference.empty()) {
    out << "        # " << hints.reference_note << ".\n"
        << "        # TODO: compute it in float64 if it works in the inputs' dtype\n"
        << "        return " << hints.reference << "\n\n";
  } else {
    out << "        # TODO: the expected output, computed by other code (PyTorch ops) in float64\n";
    if (!hints.reference_note.empty()) out << "        # " << hints.reference_note << "\n";
    out << "        raise NotImplementedError(\"TODO: a reference for " << what << "\")\n\n";
  }
  out << "    def expected_launch(self):\n"
      << "        # The kernel this case must launch, written out, never computed by the\n"
      << "        # dispatch under test. "
      << (hints.block_note.empty() ? "TODO: its block (and grid, if fixed); block=None\n"
                                     "        # where an autotuner picks it.\n"
                                   : "Its block: " + hints.block_note + ".\n")
      << "        return kwbench.Launch(\"" << kernel_pattern << "\", block=" << hints.block << ")\n\n"
      << "    def sanity(self):\n"
      << "        # TODO: a baseline and the speedup range expected against it, e.g.\n"
      << "        #   kwbench.Sanity(\"torch\", min_speedup=0.5); Sanity.report_only(\"torch\")\n"
      << "        #   reports the speedup with no bound.\n"
      << "        return kwbench.Sanity()\n\n\n";
}

// One case of the bench script: everything kwbench needs, its gaps as TODOs
// that stop the case with a clear error until they are written.
std::string case_text(const std::string& klass, const std::string& case_name, const CaseHints& hints,
                      const std::string& kernel_pattern, const std::string& what) {
  std::ostringstream out;
  write_case_setup(out, klass, case_name, hints, what);
  write_case_calls(out, hints);
  write_case_checks(out, hints, kernel_pattern, what);
  return out.str();
}

// The script's instances of a case class: one, or one a shape of the test
// its inputs come from (Klass(M=128, N=256), ...).
std::string case_instances(const std::string& klass, const CaseHints& hints) {
  if (hints.param_rows.empty()) return klass + "()";
  std::string listed;
  for (const std::vector<std::string>& row : hints.param_rows) {
    std::string arguments;
    for (std::size_t i = 0; i < row.size(); ++i)
      arguments += (i == 0 ? "" : ", ") + hints.param_names[i] + "=" + row[i];
    listed += (listed.empty() ? "" : ", ") + klass + "(" + arguments + ")";
  }
  return listed;
}

// The extension's module as setup.py names it: a literal, or an f-string
// over the file's own string variables (f"{library_name}._C").
std::string extension_module(const std::string& setup_text) {
  static const std::regex call(R"re(\b\w*[Ee]xtension\s*\(\s*(?:name\s*=\s*)?f?["']([^"']+)["'])re");
  static const std::regex placeholder(R"(\{([A-Za-z_][A-Za-z0-9_]*)\})");
  for (std::string name : matches(setup_text, call)) {
    std::smatch m;
    bool resolved = true;
    while (resolved && std::regex_search(name, m, placeholder)) {
      const std::regex assignment("\\b" + m[1].str() + R"re(\s*=\s*["']([^"'{}]+)["'])re");
      const std::vector<std::string> values = matches(setup_text, assignment);
      if (values.empty())
        resolved = false;
      else
        name = m.prefix().str() + values.front() + m.suffix().str();
    }
    if (resolved) return name;
  }
  return {};
}

struct BoundFunction {
  std::string name;
  std::string call;  // how Python reaches it
};

// The functions an extension binds: pybind11's m.def("name", &f) as
// module.name, and TORCH_LIBRARY(ns, m)'s m.def("name(Tensor a) -> Tensor")
// as torch.ops.ns.name.
std::vector<BoundFunction> bound_functions(const fs::path& repo, const std::string& module) {
  static const std::regex defined(R"re(m\.def\s*\(\s*"([A-Za-z_][A-Za-z0-9_.]*)\s*(["(]))re");
  static const std::regex library(R"(TORCH_LIBRARY\s*\(\s*([A-Za-z_][A-Za-z0-9_]*))");
  std::vector<BoundFunction> found;
  for (const fs::path& file : files_of(repo, {".cu", ".cpp", ".cc"})) {
    const std::string text = read_text(file);
    const std::vector<std::string> namespaces = matches(text, library);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), defined); it != std::sregex_iterator();
         ++it) {
      const std::string name = (*it)[1];
      const bool schema = (*it)[2] == "(";
      if (schema && namespaces.empty()) continue;
      const std::string call = schema ? "torch.ops." + namespaces.front() + "." + name : module + "." + name;
      if (std::none_of(found.begin(), found.end(), [&](const BoundFunction& f) { return f.call == call; }))
        found.push_back({name, call});
    }
  }
  return found;
}

// The kernel a bound function most likely launches: one whose name, less
// "_kernel", is part of the function's name; else the i-th.
std::string kernel_for(const std::string& function, std::size_t i, const std::vector<std::string>& kernels) {
  if (kernels.empty()) return "TODO_kernel_name";
  std::string best;
  for (const std::string& kernel : kernels) {
    std::string stem = kernel;
    if (stem.size() > 7 && stem.compare(stem.size() - 7, 7, "_kernel") == 0) stem.resize(stem.size() - 7);
    if (function.find(stem) != std::string::npos && stem.size() > best.size()) best = kernel;
  }
  return best.empty() ? kernels[std::min(i, kernels.size() - 1)] : best;
}

// A torch.utils.cpp_extension.load()/load_inline() call in a script: the
// extension a repository without a setup.py builds at run time.
struct LoadCall {
  std::string file;       // in the repository
  std::string function;   // load or load_inline
  std::string arguments;  // the call's text between its parentheses
  std::string name;       // its name= (the module's)
};

// The spellings under which a script reaches load and load_inline:
// `from torch.utils.cpp_extension import load [as x]`, `import
// torch.utils.cpp_extension as ce` (ce.load), `from torch.utils import
// cpp_extension` (cpp_extension.load), and the whole dotted path.
std::map<std::string, std::string> load_spellings(const std::string& text) {
  std::map<std::string, std::string> spellings = {{"torch.utils.cpp_extension.load", "load"},
                                                  {"torch.utils.cpp_extension.load_inline", "load_inline"}};
  static const std::regex from_import(R"(from\s+torch\.utils\.cpp_extension\s+import\s+\(?([^)\n]*))");
  static const std::regex module_alias(R"(import\s+torch\.utils\.cpp_extension\s+as\s+(\w+))");
  static const std::regex submodule(R"(from\s+torch\.utils\s+import\s+cpp_extension(?:\s+as\s+(\w+))?)");
  static const std::regex imported(R"((load_inline|load)(?:\s+as\s+(\w+))?)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), from_import); it != std::sregex_iterator();
       ++it) {
    const std::string names = (*it)[1];
    for (auto n = std::sregex_iterator(names.begin(), names.end(), imported); n != std::sregex_iterator();
         ++n)
      spellings[(*n)[2].matched ? (*n)[2].str() : (*n)[1].str()] = (*n)[1];
  }
  for (const auto* pattern : {&module_alias, &submodule}) {
    for (auto it = std::sregex_iterator(text.begin(), text.end(), *pattern); it != std::sregex_iterator();
         ++it) {
      const std::string alias = (*it)[1].matched ? (*it)[1].str() : "cpp_extension";
      spellings[alias + ".load"] = "load";
      spellings[alias + ".load_inline"] = "load_inline";
    }
  }
  return spellings;
}

// The text between the parenthesis at `open` and its match, strings and
// comments skipped; empty when it does not close.
std::string call_arguments(const std::string& text, std::size_t open) {
  int depth = 0;
  char quote = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == '\\')
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && --depth == 0) {
      return text.substr(open + 1, i - open - 1);
    }
  }
  return {};
}

std::optional<LoadCall> find_load_call(const fs::path& repo) {
  static const std::regex name_argument(R"re(\bname\s*=\s*["']([^"']+)["'])re");
  static const std::regex first_string(R"re(^\s*["']([^"']+)["'])re");
  for (const fs::path& file : files_of(repo, {".py"})) {
    const std::string text = read_text(file);
    if (text.find("cpp_extension") == std::string::npos) continue;
    for (const auto& [spelling, function] : load_spellings(text)) {
      const std::regex call("(^|[^\\w.])" + std::regex_replace(spelling, std::regex(R"(\.)"), "\\.") +
                            R"(\s*\()");
      std::smatch m;
      if (!std::regex_search(text, m, call)) continue;
      const std::size_t open = static_cast<std::size_t>(m.position(0) + m.length(0)) - 1;
      LoadCall found{in_repo(file, repo), function, call_arguments(text, open), ""};
      if (std::smatch n; std::regex_search(found.arguments, n, name_argument) ||
                         std::regex_search(found.arguments, n, first_string))
        found.name = n[1];
      if (!found.name.empty()) return found;
    }
  }
  return std::nullopt;
}

// The names a copied load() call uses that the bench script does not have:
// what its file defined beside it (a flags list, a folder), for the TODO.
std::vector<std::string> free_names(const std::string& arguments) {
  static const std::set<std::string> known = {"os",    "path", "torch",   "__file__", "True",
                                              "False", "None", "str",     "list",     "sorted",
                                              "glob",  "Path", "pathlib", "_here"};
  std::vector<std::string> names;
  for (const std::string& name : free_identifiers(arguments)) {
    if (!known.contains(name) && std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  }
  return names;
}

// The head of a bench script for an extension a load() call builds: that
// call as the repository makes it, run from its file's folder (its relative
// paths and __file__ as there), built under this checkout's build/ rather
// than torch's one shared cache, which a pull request's base and head would
// take turns rebuilding; `--build-extension` runs it alone, as the build
// command, so no stage pays the compile.
std::string load_script_head(const LoadCall& load, const std::string& variable) {
  const fs::path file(load.file);
  std::string arguments = std::regex_replace(load.arguments, std::regex(R"(\b__file__\b)"),
                                             "os.path.join(_here, \"" + file.filename().string() + "\")");
  while (!arguments.empty() &&
         (std::isspace(static_cast<unsigned char>(arguments.back())) || arguments.back() == ','))
    arguments.pop_back();
  if (arguments.find("build_directory") == std::string::npos)
    arguments += ",\n        build_directory=_build_directory()";
  const std::string folder = file.parent_path().generic_string();
  std::ostringstream out;
  out << "import os\nimport sys\n\nimport torch\nimport torch.utils.cpp_extension\n\n"
      << "# " << load.file << "'s folder: its " << load.function << "() call runs there.\n"
      << "_here = os.path.join(os.path.dirname(os.path.abspath(__file__)), \""
      << (folder.empty() ? "." : folder) << "\")\n\n\n"
      << "def _build_directory():\n"
      << "    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), \"build\", "
         "\"torch-extensions\", \""
      << load.name << "\")\n"
      << "    os.makedirs(path, exist_ok=True)\n    return path\n\n\n"
      << "def build_extension():\n"
      << "    \"\"\"The extension as " << load.file << " builds it.\"\"\"\n"
      << "    cwd = os.getcwd()\n    os.chdir(_here)\n    try:\n"
      << "        return torch.utils.cpp_extension." << load.function << "(" << arguments << ")\n"
      << "    finally:\n        os.chdir(cwd)\n\n\n"
      << "if __name__ == \"__main__\" and sys.argv[1:] == [\"--build-extension\"]:\n"
      << "    build_extension()  # kernelwatch.json's build command: compiled before any stage\n"
      << "    sys.exit(0)\n\n"
      << "import kwbench  # noqa: E402 (on PYTHONPATH for the stages, which kw runs; not for the build)\n\n"
      << variable << " = build_extension()\n\n\n";
  return out.str();
}

constexpr const char* kBenchScript = "kernelwatch_bench.py";

// The repository's Python files, each with its module name; not the bench
// script kw init wrote before (its calls are no call sites of the repository).
std::vector<PythonFile> python_files_of(const fs::path& repo) {
  std::vector<PythonFile> files;
  for (const fs::path& file : files_of(repo, {".py"})) {
    if (in_repo(file, repo) == kBenchScript) continue;
    // A module of a package is imported from the first folder above the
    // package's (src/pkg/mod.py is pkg.mod, from src); a plain folder's file
    // from the repository (kernels/add.py is kernels.add).
    fs::path root = file.parent_path();
    while (root != repo && fs::exists(root / "__init__.py")) root = root.parent_path();
    if (root != repo && !fs::exists(file.parent_path() / "__init__.py")) root = repo;
    const std::string import_root = root == repo ? "" : in_repo(root, repo);
    std::string module = fs::relative(file, root).replace_extension().generic_string();
    std::replace(module.begin(), module.end(), '/', '.');
    std::string text = read_text(file);
    std::string code = code_only(text);
    files.push_back({in_repo(file, repo), module, std::move(text), std::move(code), import_root});
  }
  return files;
}

// Where a PyTorch CUDA extension is declared: CUDAExtension in setup.py /
// pyproject.toml, or torch.utils.cpp_extension.load(...) in a script.
struct ExtensionSource {
  std::string module;
  std::string declared_in;
  bool built_by_setup = false;
  std::optional<LoadCall> load;
};

std::optional<ExtensionSource> find_extension(const fs::path& repo, Inspection& out) {
  ExtensionSource found;
  for (const char* file : {"setup.py", "pyproject.toml"}) {
    if (!fs::exists(repo / file)) continue;
    const std::string text = read_text(repo / file);
    if (text.find("CUDAExtension") == std::string::npos) continue;
    found.module = extension_module(text);
    if (found.module.empty()) {
      out.todos.push_back(std::string(file) + ": the CUDAExtension's module name could not be read; " +
                          "kernelwatch_bench.py imports TODO_module");
      found.module = "TODO_module";
    }
    found.declared_in = file;
    found.built_by_setup = true;
    return found;
  }
  if ((found.load = find_load_call(repo))) {
    found.module = found.load->name;
    found.declared_in = found.load->file;
    return found;
  }
  return std::nullopt;
}

std::vector<std::string> global_kernels(const fs::path& repo) {
  static const std::regex global_kernel(
      R"(__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_][A-Za-z0-9_]*))");
  std::vector<std::string> kernels;
  for (const fs::path& file : files_of(repo, {".cu", ".cuh"})) {
    for (const std::string& k : matches(read_text(file), global_kernel)) kernels.push_back(k);
  }
  return kernels;
}

// A case a bound function, written to `script`; returns the cases' list for kwbench.main.
std::string extension_cases(std::ostringstream& script, const std::vector<BoundFunction>& functions,
                            const std::string& module, const fs::path& repo,
                            const std::vector<std::string>& kernels, Inspection& out) {
  const std::vector<PythonFile> python_files = python_files_of(repo);
  // Cases are named by the package, not its private binary ("pkg._C").
  std::string display = module;
  if (const std::size_t dot = display.rfind('.'); dot != std::string::npos && display[dot + 1] == '_')
    display.resize(dot);
  std::string cases;
  for (std::size_t i = 0; i < functions.size(); ++i) {
    const BoundFunction& function = functions[i];
    // A CUDA kernel's demangled name may start with its return type
    // (templates) and its namespace.
    CaseHints hints;
    hints.call = function.call + "()";
    if (auto reference = reference_of(function.name, python_files)) {
      const auto& [where, name] = *reference;
      hints.reference_note = "the repository has " + name + " (" + where->path + "): e.g. return " +
                             where->module + "." + name + "(...)";
      out.notes.push_back(function.name + ": reference " + hints.reference_note);
    }
    script << case_text(class_name(function.name), display + "/" + function.name, hints,
                        "*" + kernel_for(function.name, i, kernels) + "*", function.call);
    cases += (cases.empty() ? "" : ", ") + class_name(function.name) + "()";
  }
  return cases;
}

bool pytorch_extension(const fs::path& repo, const InitOptions& options, Inspection& out) {
  const std::optional<ExtensionSource> source = find_extension(repo, out);
  if (!source) return false;
  const std::string& module = source->module;
  const std::optional<LoadCall>& load = source->load;
  // A module load() built is no importable name: the script holds it in a variable.
  const std::string reached_as = load ? identifier(module) : module;
  std::vector<BoundFunction> functions = bound_functions(repo, reached_as);
  const std::vector<std::string> kernels = global_kernels(repo);
  if (functions.empty()) functions.push_back({"forward", reached_as + ".forward"});
  const std::size_t bound = functions.size();
  std::erase_if(functions, [&](const BoundFunction& f) { return !selected(options.only, {f.name}); });
  out.notes.push_back(
      "PyTorch CUDA extension \"" + module + "\" (" + (load ? load->function + "() in " : "") +
      source->declared_in + "), " + std::to_string(bound) + " bound function(s), " +
      std::to_string(kernels.size()) + " __global__ kernel(s)" +
      (functions.size() < bound ? ", " + std::to_string(functions.size()) + " selected" : ""));
  if (functions.empty()) return false;
  out.build_commands = {source->built_by_setup ? "python3 setup.py build_ext --inplace"
                        : load                 ? "python3 kernelwatch_bench.py --build-extension"
                                               : "true"};
  std::ostringstream script;
  script << "#!/usr/bin/env python3\n"
         << "\"\"\"kernelwatch's cases for the " << module
         << " extension, written by kw init: fill in each TODO.\n"
         << "kw puts kwbench on PYTHONPATH; by hand: PYTHONPATH=$(kw harness-path) python3 "
         << "kernelwatch_bench.py --list\"\"\"\n";
  if (load) {
    script << load_script_head(*load, reached_as);
    for (const std::string& name : free_names(load->arguments))
      out.todos.push_back("kernelwatch_bench.py: build_extension() uses " + name + ", which " + load->file +
                          " defines beside its " + load->function + "() call: copy it");
  } else {
    script << "import sys\n\nimport kwbench\nimport torch\n\nimport " << module
           << "  # built by kernelwatch.json's build commands\n\n\n";
  }
  const std::string cases = extension_cases(script, functions, module, repo, kernels, out);
  script << "if __name__ == \"__main__\":\n    sys.exit(kwbench.main([" << cases << "]"
         << (load ? std::string() : ", modules=[\"" + module + "\"]") << "))\n";
  out.script_path = kBenchScript;
  out.script_text = script.str();
  out.benches.push_back(
      {"extension", "python", out.script_path, "the extension's bench script, written now"});
  out.todos.push_back(
      "kernelwatch_bench.py: each case's inputs, reference, launch and sanity range (the TODOs)");
  return true;
}

// kernelwatch_bench.py for the Triton kernels found, a case (or a case a
// shape) each, importing the modules that hold them.
void write_triton_script(const std::vector<std::pair<const PythonFile*, std::string>>& kernels,
                         const std::vector<PythonFile>& files, Inspection& out) {
  std::set<std::string> modules, import_roots;
  std::string cases, case_classes;
  const std::vector<std::pair<std::string, std::string>> names = case_names(kernels);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const auto& [file, kernel] = kernels[i];
    const auto& [case_class, case_name] = names[i];
    // A src layout's packages are imported from src/, installed or not; a
    // package elsewhere (python/triton) is the installed one's source.
    if (file->import_root == "src") import_roots.insert(file->import_root);
    // The launch goes through the module's launcher where it has one, the
    // kernel is named as Triton compiles it.
    const CaseHints hints = triton_case_hints(*file, kernel, files);
    modules.insert(file->module);
    modules.insert(hints.modules.begin(), hints.modules.end());
    if (!hints.call_note.empty())
      out.notes.push_back(kernel + ": " + hints.call.substr(0, hints.call.find('(')) + "(), " +
                          hints.call_note);
    if (!hints.block_note.empty())
      out.notes.push_back(kernel + ": block " + hints.block + ", " + hints.block_note);
    if (!hints.reference.empty() || !hints.reference_note.empty())
      out.notes.push_back(kernel + ": reference " + hints.reference_note);
    case_classes += case_text(case_class, case_name, hints, kernel + "*", file->module + "." + kernel);
    cases += (cases.empty() ? "" : ", ") + case_instances(case_class, hints);
    if (!hints.param_rows.empty())
      out.notes.push_back(kernel + ": " + std::to_string(hints.param_rows.size()) + " case(s), " +
                          hints.params_note);
  }
  for (const PythonFile& file : files) {
    if (!modules.contains(file.module)) continue;
    for (const std::string& effect : import_side_effects(file))
      out.todos.push_back(
          "kernelwatch_bench.py imports " + file.module + ", and " + effect +
          " when imported: every stage's process pays it (put it under if __name__ == \"__main__\":)");
  }
  std::ostringstream script;
  script << "#!/usr/bin/env python3\n"
         << "\"\"\"kernelwatch's cases for this repository's Triton kernels, written by kw init:\n"
         << "fill in each TODO. kw puts kwbench on PYTHONPATH; by hand:\n"
         << "PYTHONPATH=$(kw harness-path) python3 kernelwatch_bench.py --list\"\"\"\n"
         << "import os\nimport sys\n\nimport kwbench\nimport torch\n\n";
  for (const std::string& root : import_roots)
    script << "sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), \"" << root
           << "\"))\n";
  for (const std::string& module : modules) script << "import " << module << "\n";
  script << "\n\n" << case_classes;
  std::string module_list;
  for (const std::string& module : modules)
    module_list += (module_list.empty() ? "\"" : ", \"") + module + "\"";
  script << "if __name__ == \"__main__\":\n    sys.exit(kwbench.main([" << cases << "], modules=["
         << module_list << "]))\n";
  out.script_path = kBenchScript;
  out.script_text = script.str();
  out.benches.push_back(
      {"triton", "python", out.script_path, "the Triton kernels' bench script, written now"});
  out.todos.push_back(
      "kernelwatch_bench.py: what each case still marks TODO (its name and params, the inputs and arguments "
      "where no test showed them, baselines, the reference, the sanity range)");
}

// The repository's own benchmark scripts, tracked as they are: operators
// in TritonBench's layout (tritonbench/operators/<op>/operator.py with
// @register_benchmark methods: "format": "tritonbench"), scripts of
// triton.testing.perf_report benchmarks ("format": "perf_report"), and
// those calling do_bench or torch.utils.benchmark's Timer ("format":
// "do_bench"; not a test module). Returns
// the files whose kernels they cover: their own, and the repository's
// modules they import (a src-layout package's too).
std::set<std::string> benchmark_scripts(const std::vector<PythonFile>& files, const InitOptions& options,
                                        Inspection& out) {
  static const std::regex timed(R"(\bdo_bench(?:_cudagraph)?\s*\()");
  static const std::regex timer(R"(\bTimer\s*\()");
  static const std::regex operator_file(R"((?:^|/)operators/([A-Za-z0-9_]+)/operator\.py$)");
  std::set<std::string> covered;
  const std::size_t benches_before = out.benches.size();
  const std::set<std::string> wrappers = perf_report_wrappers(files);
  std::vector<const PythonFile*> perf_report_scripts;
  for (const PythonFile& file : files) {
    std::smatch op;
    const bool tritonbench = std::regex_search(file.path, op, operator_file) &&
                             file.text.find("register_benchmark") != std::string::npos;
    const bool torch_timer = file.text.find("torch.utils.benchmark") != std::string::npos;
    if (!tritonbench && !torch_timer && file.text.find("triton") == std::string::npos) continue;
    const bool perf_report = !tritonbench && declares_perf_report(file, wrappers);
    const std::string stem = fs::path(file.path).stem().string();
    const bool test = stem.rfind("test_", 0) == 0 || stem.ends_with("_test") || stem == "conftest";
    const bool times =
        std::regex_search(file.text, timed) || (torch_timer && std::regex_search(file.text, timer));
    // A module of helpers that call do_bench is no script of its own.
    if (!tritonbench && !perf_report && (test || !times || !runs_as_script(file))) continue;
    std::string name = tritonbench ? op[1].str() : stem;
    std::replace_if(
        name.begin(), name.end(),
        [](char c) { return !std::isalnum(static_cast<unsigned char>(c)) && c != '-'; }, '_');
    if (!selected(options.only, {name})) continue;
    const std::string format = tritonbench ? "tritonbench" : perf_report ? "perf_report" : "do_bench";
    out.benches.push_back({name, format, file.path,
                           tritonbench   ? "a TritonBench operator, as it is"
                           : perf_report ? "a triton.testing.perf_report script, as it is"
                                         : "a script timing with do_bench or torch's Timer, as it is"});
    covered.insert(file.path);
    if (perf_report) perf_report_scripts.push_back(&file);
    static const std::regex imported(
        R"((?:^|\n)[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import|import[ \t]+([\w.]+)))");
    for (auto it = std::sregex_iterator(file.text.begin(), file.text.end(), imported);
         it != std::sregex_iterator(); ++it) {
      const std::string module = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
      // The module, or a package's modules (`import trident` reaches trident.kernel.softmax).
      for (const PythonFile& other : files) {
        if (other.module == module || other.module.ends_with("." + module) ||
            other.module.starts_with(module + "."))
          covered.insert(other.path);
      }
    }
  }
  if (const std::string todo = run_args_todo(perf_report_scripts, files, wrappers); !todo.empty())
    out.todos.push_back(todo);
  if (out.benches.size() > benches_before)
    out.notes.push_back(
        "Triton: " + std::to_string(out.benches.size() - benches_before) +
        " benchmark script(s) (TritonBench operators, perf_report or do_bench), tracked as they are (a case "
        "per shape, the provider that says triton the candidate)");
  return covered;
}

// Triton kernels: functions under @triton.jit that the repository launches
// (name[grid](...)); a @triton.jit helper that kernels call is no case.
// Those in a benchmark script's file are its cases already, and those of a
// copy for another accelerator's backend are left out, said so.
bool triton_kernels(const fs::path& repo, const InitOptions& options, Inspection& out) {
  static const std::regex jit(
      R"(@triton\.(?:jit|autotune)[^\n]*\n(?:[ \t]*@[^\n]*\n|[ \t)](?![ \t]*def\s)[^\n]*\n)*[ \t]*def\s+([A-Za-z_]\w*))");
  // name[grid](...), the grid perhaps indexing ((x.shape[0],)).
  static const std::regex launch(R"(\b([A-Za-z_]\w*)\s*\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\]\s*\()");
  const std::vector<PythonFile> files = python_files_of(repo);
  const std::set<std::string> covered = benchmark_scripts(files, options, out);
  std::vector<std::pair<const PythonFile*, std::string>> kernels;  // its file, the kernel
  std::set<std::string> launched;
  std::map<std::string, int> other_backends;  // folder -> kernels left out
  for (const PythonFile& file : files) {
    for (const std::string& name : matches(file.text, launch)) launched.insert(name);
    if (file.text.find("import triton") == std::string::npos || covered.contains(file.path)) continue;
    const std::vector<std::string> jitted_here = matches(file.text, jit);
    if (const std::string backend = other_backend_folder(file.path); !backend.empty()) {
      other_backends[backend] += static_cast<int>(jitted_here.size());
      continue;
    }
    for (const std::string& kernel : jitted_here) kernels.emplace_back(&file, kernel);
  }
  for (const auto& [folder, count] : other_backends) {
    if (count > 0)
      out.notes.push_back("Triton: " + std::to_string(count) + " @triton.jit function(s) in " + folder +
                          "/ left out: a copy for another accelerator's backend, not the CUDA one");
  }
  if (kernels.empty()) return !covered.empty();
  const std::size_t jitted = kernels.size();
  if (std::any_of(kernels.begin(), kernels.end(), [&](const auto& k) { return launched.contains(k.second); }))
    std::erase_if(kernels, [&](const auto& k) { return !launched.contains(k.second); });
  const std::size_t launchable = kernels.size();
  std::erase_if(kernels, [&](const auto& k) { return !selected(options.only, {k.second}); });
  out.notes.push_back(
      "Triton: " + std::to_string(jitted) + " @triton.jit function(s), " + std::to_string(launchable) +
      " launched as kernels" +
      (kernels.size() < launchable ? ", " + std::to_string(kernels.size()) + " selected" : ""));
  out.build_commands = {"true"};  // Triton compiles on first launch
  if (kernels.empty()) return !covered.empty();
  write_triton_script(kernels, files, out);
  return true;
}

std::string project_name(const fs::path& repo) {
  std::string name = fs::weakly_canonical(repo).filename().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '-';
  }
  return name.empty() ? "project" : name;
}

}  // namespace

Inspection inspect_repository(const fs::path& repo, const InitOptions& options) {
  Inspection out;
  out.project = project_name(repo);
  // The CMake project: the configured tree's source, else the top's or a
  // single folder's CMakeLists.txt (a kit that keeps the project one level down).
  fs::path source_dir;
  if (const std::string home = cache_value(repo / options.build_dir, "CMAKE_HOME_DIRECTORY"); !home.empty())
    source_dir = home;
  else if (fs::exists(repo / "CMakeLists.txt"))
    source_dir = repo;
  if (!source_dir.empty()) {
    const std::vector<CmakeOption> declared = cmake_options(source_dir);
    const std::vector<std::string> bench_options = benchmark_options(declared);
    if (!options.configure || !cmake_targets(repo, source_dir, bench_options, options, out))
      cmake_files(repo, options, out);
    if (!out.benches.empty()) {
      cmake_build_commands(repo, source_dir, declared, bench_options, options, out);
      out.notes.push_back("CMake: " + std::to_string(out.benches.size()) + " benchmark executable(s)");
    }
  }
  if (out.benches.empty() && !pytorch_extension(repo, options, out)) triton_kernels(repo, options, out);
  if (out.benches.empty() && !out.configure_failure.empty())
    out.todos.push_back("no bench found: " + out.configure_failure);
  else if (out.benches.empty())
    out.todos.push_back(
        "no bench found: add one to benches[] (an NVBench or Google Benchmark executable, or a kwbench.py "
        "script; docs/repo-config.md)");
  const bool python_benches = std::any_of(out.benches.begin(), out.benches.end(), [](const FoundBench& b) {
    return b.format == "python" || b.format == "perf_report" || b.format == "do_bench" ||
           b.format == "tritonbench";
  });
  if (const std::vector<std::string> missing =
          python_benches ? missing_requirements(repo, "python3") : std::vector<std::string>{};
      !missing.empty()) {
    std::string names;
    for (const std::string& name : missing) names += (names.empty() ? "" : ", ") + name;
    out.todos.push_back("requirements.txt names " + names +
                        ", which python3 here does not have installed: the benches import the repository's "
                        "modules, which may import them (pip install -r requirements.txt on the GPU host)");
  }
  for (const FoundBench& bench : out.benches) {
    if (bench.format != "python" && bench.format != "perf_report" && bench.format != "do_bench" &&
        bench.format != "tritonbench") {
      out.todos.push_back(
          "benches[\"" + bench.name +
          "\"]: `launches` (the kernels it must launch, with their block) for launch_geometry, "
          "and `check` (a correctness command), if it has one");
    }
  }
  return out;
}

json repo_config_of(const Inspection& inspection) {
  json benches = json::array();
  for (const FoundBench& bench : inspection.benches)
    benches.push_back({{"name", bench.name}, {"path", bench.path}, {"format", bench.format}});
  return {{"project", inspection.project},
          {"build",
           {{"commands", inspection.build_commands.empty() ? std::vector<std::string>{"true"}
                                                           : inspection.build_commands}}},
          {"benches", benches}};
}

struct InitArgs {
  std::string dir = ".";
  InitOptions options;
  bool force = false, no_configure = false;
  std::string only;
};

// kernelwatch.json and the bench script written, then what was found and what is left.
int write_init(InitArgs& args) {
  const fs::path repo = args.dir;
  const fs::path config_file = repo / "kernelwatch.json";
  if (fs::exists(config_file) && !args.force) {
    std::cerr << "kw init: " << config_file.string() << " exists (--force replaces it)\n";
    return kExitInvalid;
  }
  args.options.configure = !args.no_configure;
  std::istringstream globs(args.only);
  for (std::string glob; std::getline(globs, glob, ',');) {
    if (!glob.empty()) args.options.only.push_back(glob);
  }
  const Inspection inspection = inspect_repository(repo, args.options);
  if (inspection.benches.empty()) {
    for (const std::string& note : inspection.notes) std::cout << "  " << note << "\n";
    std::cerr << "kw init: " << inspection.todos.front() << "; nothing written\n";
    return kExitInvalid;
  }
  const json config = repo_config_of(inspection);
  parse_repo_config(config);  // what is written is what kw run reads
  std::ofstream(config_file) << config.dump(2) << "\n";
  std::cout << "wrote " << config_file.string() << "\n";
  if (!inspection.script_path.empty()) {
    const fs::path script = repo / inspection.script_path;
    if (fs::exists(script) && !args.force) {
      std::cout << "kept " << script.string() << " (it exists; --force replaces it)\n";
    } else {
      std::ofstream(script) << inspection.script_text;
      std::cout << "wrote " << script.string() << "\n";
    }
  }
  std::cout << "\nfound:\n";
  for (const std::string& note : inspection.notes) std::cout << "  " << note << "\n";
  for (const FoundBench& bench : inspection.benches)
    std::cout << "  bench \"" << bench.name << "\" (" << bench.format << "): " << bench.path << " - "
              << bench.how << "\n";
  std::cout << "\nstill to write:" << (inspection.todos.empty() ? " nothing kw init can tell" : "") << "\n";
  for (const std::string& todo : inspection.todos) std::cout << "  - " << todo << "\n";
  std::cout << "\nthen, on a GPU host, before the first push: kw run --repo " << repo.string()
            << " --stages preflight --allow-dirty --out first-run.json\n";
  return kExitOk;
}

void add_init_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<InitArgs>();
  auto* command = app.add_subcommand(
      "init", "Look at a repository, write a kernelwatch.json for the benches it has, and say what is left");
  command->add_option("DIR", args->dir, "the repository")->capture_default_str();
  command
      ->add_option("--build-dir", args->options.build_dir,
                   "its CMake build tree, relative to DIR (one configured there already is re-read)")
      ->capture_default_str();
  command->add_option("--only", args->only,
                      "comma-separated globs over bench, target, function or kernel names: write only those");
  command->add_flag("--force", args->force, "replace an existing kernelwatch.json (and bench script)");
  command->add_flag("--no-configure", args->no_configure,
                    "read CMake files instead of configuring the project");
  command->callback([args, &exit_code] { exit_code = write_init(*args); });
}

}  // namespace kw::agent
