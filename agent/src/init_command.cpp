#include "init_command.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "commands.hpp"
#include "kw/common/subprocess.hpp"
#include "repo_config.hpp"

namespace kw::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool skipped_dir(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.empty() || name[0] == '.' || name == "build" || name == "node_modules" ||
         name == "third_party" || name == "__pycache__" || name.rfind("build-", 0) == 0 ||
         name.rfind("cmake-build", 0) == 0;
}

// The repository's files with one of `extensions`, its own (no build trees,
// no hidden folders, no vendored code), at most `limit` of them.
std::vector<fs::path> files_of(const fs::path& repo, std::initializer_list<const char*> extensions,
                               std::size_t limit = 2000) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(repo, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator() && found.size() < limit; it.increment(ec)) {
    if (ec) break;
    if (it->is_directory(ec)) {
      if (skipped_dir(it->path())) it.disable_recursion_pending();
      continue;
    }
    const std::string name = it->path().filename().string();
    for (const char* extension : extensions) {
      const std::string want = extension;
      if (name.size() >= want.size() && name.compare(name.size() - want.size(), want.size(), want) == 0) {
        found.push_back(it->path());
        break;
      }
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string in_repo(const fs::path& file, const fs::path& repo) {
  return fs::relative(file, repo).generic_string();
}

std::string kind_of_links(const std::string& links) {
  if (links.find("nvbench") != std::string::npos) return "nvbench";
  if (links.find("benchmark") != std::string::npos) return "gbench";
  return {};
}

std::string bench_name(std::string target) {
  for (const char* prefix : {"nvbench.example.cpp17.", "nvbench.example.", "bench_", "benchmark_"}) {
    if (target.rfind(prefix, 0) == 0 && target.size() > std::string(prefix).size())
      target = target.substr(std::string(prefix).size());
  }
  for (char& c : target) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return target;
}

// CMake's file API: after a configure, each executable target with its
// artifact's path and what it links.
bool cmake_targets(const fs::path& repo, const std::string& build_dir, Inspection& out) {
  const fs::path build = repo / build_dir;
  fs::create_directories(build / ".cmake/api/v1/query");
  std::ofstream(build / ".cmake/api/v1/query/codemodel-v2").close();
  common::ChildSpec spec;
  spec.argv = {"cmake", "-S", repo.string(), "-B", build.string(), "-DCMAKE_BUILD_TYPE=Release"};
  spec.cwd = repo;
  spec.timeout_s = 600;
  say("configuring with CMake (" + build_dir + ") to read its targets");
  const common::ChildOutcome configured = common::run_child(spec);
  const fs::path reply = build / ".cmake/api/v1/reply";
  if (!configured.ok() || !fs::exists(reply)) {
    out.notes.push_back("cmake could not configure the project here (" + configured.describe() +
                        "): targets read from the CMake files instead");
    return false;
  }
  fs::path index;
  for (const auto& entry : fs::directory_iterator(reply)) {
    if (entry.path().filename().string().rfind("index-", 0) == 0) index = entry.path();
  }
  if (index.empty()) return false;
  const json index_json = json::parse(read_text(index), nullptr, false);
  std::string codemodel_file;
  for (const json& object : index_json.value("objects", json::array())) {
    if (object.value("kind", "") == "codemodel") codemodel_file = object.value("jsonFile", "");
  }
  if (codemodel_file.empty()) return false;
  const json codemodel = json::parse(read_text(reply / codemodel_file), nullptr, false);
  for (const json& configuration : codemodel.value("configurations", json::array())) {
    for (const json& target_ref : configuration.value("targets", json::array())) {
      const json target = json::parse(read_text(reply / target_ref.value("jsonFile", "")), nullptr, false);
      if (!target.is_object() || target.value("type", "") != "EXECUTABLE") continue;
      std::string links;
      for (const json& fragment : target["link"].value("commandFragments", json::array()))
        links += fragment.value("fragment", "") + " ";
      for (const json& dependency : target.value("dependencies", json::array()))
        links += dependency.value("id", "") + " ";
      const std::string kind = kind_of_links(links);
      if (kind.empty() || target.value("artifacts", json::array()).empty()) continue;
      fs::path artifact = target["artifacts"][0].value("path", "");
      if (artifact.is_relative()) artifact = build / artifact;
      out.benches.push_back({bench_name(target.value("name", "")), kind, in_repo(artifact, repo),
                             "CMake target " + target.value("name", "") + " links " +
                                 (kind == "nvbench" ? "NVBench" : "Google Benchmark")});
    }
    break;  // the one configuration
  }
  return true;
}

// Without a configure: add_executable(NAME ...) and target_link_libraries(NAME
// ... nvbench|benchmark ...) in the CMake files; the path is a guess.
void cmake_files(const fs::path& repo, const std::string& build_dir, Inspection& out) {
  static const std::regex executable(R"(add_executable\s*\(\s*([A-Za-z0-9_.+-]+))");
  static const std::regex link(R"(target_link_libraries\s*\(\s*([A-Za-z0-9_.+-]+)([^)]*)\))");
  for (const fs::path& file : files_of(repo, {"CMakeLists.txt"})) {
    const std::string text = read_text(file);
    std::set<std::string> executables;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), executable); it != std::sregex_iterator();
         ++it)
      executables.insert((*it)[1]);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1], kind = kind_of_links((*it)[2]);
      if (kind.empty() || !executables.contains(target)) continue;
      const fs::path dir = fs::relative(file.parent_path(), repo);
      const std::string path = (fs::path(build_dir) / dir / target).lexically_normal().generic_string();
      out.benches.push_back({bench_name(target), kind, path, in_repo(file, repo) + ": " + target});
      out.todos.push_back("check benches[\"" + bench_name(target) + "\"].path (" + path + "): guessed from " +
                          in_repo(file, repo) + ", not from a configured build");
    }
  }
}

std::vector<std::string> matches(const std::string& text, const std::regex& pattern) {
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern); it != std::sregex_iterator();
       ++it) {
    if (std::find(found.begin(), found.end(), (*it)[1].str()) == found.end()) found.push_back((*it)[1]);
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

// One case of the bench script: everything kwbench needs, its gaps as TODOs
// that stop the case with a clear error until they are written.
std::string case_text(const std::string& klass, const std::string& case_name, const std::string& call,
                      const std::string& kernel, const std::string& what) {
  std::ostringstream out;
  out << "class " << klass << "(kwbench.Case):\n"
      << "    name = \"" << case_name << "\"  # TODO: name the shape, e.g. \"" << case_name << "/fp16/n1m\"\n"
      << "    params = {}  # TODO: the shape and dtype, e.g. {\"n\": 1 << 20, \"dtype\": \"fp16\"}\n\n"
      << "    def setup(self, state):\n"
      << "        # TODO: fresh random inputs on the GPU (never zeros), e.g.\n"
      << "        #   self.x = torch.randn(1 << 20, device=\"cuda\", dtype=torch.float16)\n"
      << "        raise NotImplementedError(\"TODO: make the inputs of " << what << "\")\n\n"
      << "    def run_candidate(self, state):\n"
      << "        # What the call returns is compared with reference(); a call that\n"
      << "        # writes into a buffer instead defines output(state) returning it.\n"
      << "        return " << call << "  # TODO: the arguments\n\n"
      << "    def reference(self, state):\n"
      << "        # TODO: the expected output, computed by other code (PyTorch ops) in float64\n"
      << "        raise NotImplementedError(\"TODO: a reference for " << what << "\")\n\n"
      << "    def expected_launch(self):\n"
      << "        # The kernel this case must launch, written out, never computed by the\n"
      << "        # dispatch under test. TODO: its block (and grid, if fixed).\n"
      << "        return kwbench.Launch(\"" << kernel << "*\", block=(128, 1, 1))\n\n"
      << "    def sanity(self):\n"
      << "        # TODO: a baseline and the speedup range expected against it, e.g.\n"
      << "        #   kwbench.Sanity(\"torch\", min_speedup=0.5); Sanity.report_only(\"torch\")\n"
      << "        #   reports the speedup with no bound.\n"
      << "        return kwbench.Sanity()\n\n\n";
  return out.str();
}

// A PyTorch CUDA extension: CUDAExtension in setup.py / pyproject.toml, or
// torch.utils.cpp_extension.load(...) in a script.
bool pytorch_extension(const fs::path& repo, Inspection& out) {
  static const std::regex extension_name(R"re(CUDAExtension\s*\(\s*(?:name\s*=\s*)?["']([^"']+)["'])re");
  static const std::regex load_name(R"re(cpp_extension\.load\s*\(\s*(?:name\s*=\s*)?["']([^"']+)["'])re");
  static const std::regex defined(R"re(m\.def\s*\(\s*"([A-Za-z_][A-Za-z0-9_]*)")re");
  static const std::regex global_kernel(
      R"(__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_][A-Za-z0-9_]*))");
  std::string module, declared_in;
  bool built_by_setup = false;
  for (const char* file : {"setup.py", "pyproject.toml"}) {
    if (!fs::exists(repo / file)) continue;
    const std::vector<std::string> names = matches(read_text(repo / file), extension_name);
    if (!names.empty()) {
      module = names.front();
      declared_in = file;
      built_by_setup = true;
      break;
    }
  }
  if (module.empty()) {
    for (const fs::path& file : files_of(repo, {".py"})) {
      const std::vector<std::string> names = matches(read_text(file), load_name);
      if (!names.empty()) {
        module = names.front();
        declared_in = in_repo(file, repo);
        break;
      }
    }
  }
  if (module.empty()) return false;
  // "package.module" imports as such; its functions are where the binding is.
  std::vector<std::string> functions, kernels;
  for (const fs::path& file : files_of(repo, {".cu", ".cpp", ".cc", ".cuh"})) {
    const std::string text = read_text(file);
    for (const std::string& f : matches(text, defined)) functions.push_back(f);
    for (const std::string& k : matches(text, global_kernel)) kernels.push_back(k);
  }
  if (functions.empty()) functions.push_back("forward");
  out.notes.push_back("PyTorch CUDA extension \"" + module + "\" (" + declared_in + "), " +
                      std::to_string(functions.size()) + " bound function(s), " +
                      std::to_string(kernels.size()) + " __global__ kernel(s)");
  if (built_by_setup)
    out.build_commands = {"python3 setup.py build_ext --inplace"};
  else
    out.build_commands = {"true"};  // cpp_extension.load builds on import
  std::ostringstream script;
  script << "#!/usr/bin/env python3\n"
         << "\"\"\"kernelwatch's cases for the " << module
         << " extension, written by kw init: fill in each TODO.\n"
         << "kw puts kwbench on PYTHONPATH; by hand: PYTHONPATH=$(kw harness-path) python3 "
         << "kernelwatch_bench.py --list\"\"\"\n"
         << "import sys\n\nimport kwbench\nimport torch\n\nimport " << module
         << "  # built by kernelwatch.json's build commands\n\n\n";
  std::string cases;
  for (std::size_t i = 0; i < functions.size(); ++i) {
    const std::string& function = functions[i];
    const std::string kernel =
        kernels.empty() ? "TODO_kernel_name" : kernels[std::min(i, kernels.size() - 1)];
    script << case_text(class_name(function), module + "/" + function, module + "." + function + "()", kernel,
                        module + "." + function);
    cases += (cases.empty() ? "" : ", ") + class_name(function) + "()";
  }
  script << "if __name__ == \"__main__\":\n    sys.exit(kwbench.main([" << cases << "], modules=[\"" << module
         << "\"]))\n";
  out.script_path = "kernelwatch_bench.py";
  out.script_text = script.str();
  out.benches.push_back(
      {"extension", "python", out.script_path, "the extension's bench script, written now"});
  out.todos.push_back(
      "kernelwatch_bench.py: each case's inputs, reference, launch and sanity range (the TODOs)");
  return true;
}

// Triton kernels: functions under @triton.jit, in the files that hold them.
bool triton_kernels(const fs::path& repo, Inspection& out) {
  static const std::regex jit(
      R"(@triton\.(?:jit|autotune)[^\n]*\n(?:@[^\n]*\n)*def\s+([A-Za-z_][A-Za-z0-9_]*))");
  std::vector<std::pair<std::string, std::string>> kernels;  // module, kernel
  for (const fs::path& file : files_of(repo, {".py"})) {
    const std::string text = read_text(file);
    if (text.find("import triton") == std::string::npos) continue;
    std::string module = in_repo(file, repo);
    module = module.substr(0, module.size() - 3);
    std::replace(module.begin(), module.end(), '/', '.');
    for (const std::string& kernel : matches(text, jit)) kernels.emplace_back(module, kernel);
  }
  if (kernels.empty()) return false;
  std::set<std::string> modules;
  for (const auto& [module, _] : kernels) modules.insert(module);
  out.notes.push_back("Triton: " + std::to_string(kernels.size()) + " @triton.jit kernel(s) in " +
                      std::to_string(modules.size()) + " module(s)");
  out.build_commands = {"true"};  // Triton compiles on first launch
  std::ostringstream script;
  script << "#!/usr/bin/env python3\n"
         << "\"\"\"kernelwatch's cases for this repository's Triton kernels, written by kw init:\n"
         << "fill in each TODO. kw puts kwbench on PYTHONPATH; by hand:\n"
         << "PYTHONPATH=$(kw harness-path) python3 kernelwatch_bench.py --list\"\"\"\n"
         << "import sys\n\nimport kwbench\nimport torch\n\n";
  for (const std::string& module : modules) script << "import " << module << "\n";
  script << "\n\n";
  std::string cases;
  for (const auto& [module, kernel] : kernels) {
    // The launch goes through the module's wrapper (kernel[grid](...)), the
    // kernel is named as Triton compiles it.
    script << case_text(class_name(kernel), identifier(kernel), module + "." + kernel + "[(1,)]", kernel,
                        module + "." + kernel);
    cases += (cases.empty() ? "" : ", ") + class_name(kernel) + "()";
  }
  std::string module_list;
  for (const std::string& module : modules)
    module_list += (module_list.empty() ? "\"" : ", \"") + module + "\"";
  script << "if __name__ == \"__main__\":\n    sys.exit(kwbench.main([" << cases << "], modules=["
         << module_list << "]))\n";
  out.script_path = "kernelwatch_bench.py";
  out.script_text = script.str();
  out.benches.push_back(
      {"triton", "python", out.script_path, "the Triton kernels' bench script, written now"});
  out.todos.push_back(
      "kernelwatch_bench.py: each case's inputs, the launch (its wrapper or kernel[grid](...)), reference, "
      "launch and sanity range (the TODOs)");
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

Inspection inspect_repository(const fs::path& repo, const std::string& build_dir, bool configure) {
  Inspection out;
  out.project = project_name(repo);
  if (fs::exists(repo / "CMakeLists.txt")) {
    if (!configure || !cmake_targets(repo, build_dir, out)) cmake_files(repo, build_dir, out);
    if (!out.benches.empty()) {
      std::string targets;
      for (const FoundBench& bench : out.benches) targets += " " + fs::path(bench.path).filename().string();
      out.build_commands = {"cmake -S . -B " + build_dir + " -DCMAKE_BUILD_TYPE=Release",
                            "cmake --build " + build_dir + " --target" + targets};
      out.notes.push_back("CMake: " + std::to_string(out.benches.size()) + " benchmark executable(s)");
    }
  }
  if (out.benches.empty() && !pytorch_extension(repo, out)) triton_kernels(repo, out);
  if (out.benches.empty())
    out.todos.push_back(
        "no bench found: add one to benches[] (an NVBench or Google Benchmark executable, or a kwbench.py "
        "script; docs/repo-config.md)");
  for (const FoundBench& bench : out.benches) {
    if (bench.format != "python") {
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

void add_init_command(CLI::App& app, int& exit_code) {
  struct Args {
    std::string dir = ".";
    std::string build_dir = "build";
    bool force = false, no_configure = false;
  };
  auto args = std::make_shared<Args>();
  auto* command = app.add_subcommand(
      "init", "Look at a repository, write a kernelwatch.json for the benches it has, and say what is left");
  command->add_option("DIR", args->dir, "the repository")->capture_default_str();
  command->add_option("--build-dir", args->build_dir, "where its CMake build goes, relative to DIR")
      ->capture_default_str();
  command->add_flag("--force", args->force, "replace an existing kernelwatch.json (and bench script)");
  command->add_flag("--no-configure", args->no_configure,
                    "read CMake files instead of configuring the project");
  command->callback([args, &exit_code] {
    const fs::path repo = args->dir;
    const fs::path config_file = repo / "kernelwatch.json";
    if (fs::exists(config_file) && !args->force) {
      std::cerr << "kw init: " << config_file.string() << " exists (--force replaces it)\n";
      exit_code = kExitInvalid;
      return;
    }
    const Inspection inspection = inspect_repository(repo, args->build_dir, !args->no_configure);
    if (inspection.benches.empty()) {
      for (const std::string& note : inspection.notes) std::cout << "  " << note << "\n";
      std::cerr << "kw init: " << inspection.todos.front() << "; nothing written\n";
      exit_code = kExitInvalid;
      return;
    }
    const json config = repo_config_of(inspection);
    parse_repo_config(config);  // what is written is what kw run reads
    std::ofstream(config_file) << config.dump(2) << "\n";
    std::cout << "wrote " << config_file.string() << "\n";
    if (!inspection.script_path.empty()) {
      const fs::path script = repo / inspection.script_path;
      if (fs::exists(script) && !args->force) {
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
    std::cout << "\nstill to write:\n";
    for (const std::string& todo : inspection.todos) std::cout << "  - " << todo << "\n";
    std::cout << "\nthen, on a GPU host, before the first push: kw run --repo " << repo.string()
              << " --stages preflight --allow-dirty --out first-run.json\n";
    exit_code = kExitOk;
  });
}

}  // namespace kw::agent
