// Build trees: the compiler cache shared by worktrees, commits built
// incrementally, bases kept loadable, one build per base across processes.
#include "agent_test_support.hpp"

namespace kw::agent {
namespace {

TEST(CompilerCache, WorktreesOfAProjectShareIt) {
  char pattern[] = "/tmp/kw-ccache-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  fs::path root = pattern;
  for (const char* tree : {"a", "b"}) {
    fs::create_directories(root / tree);
    std::ofstream(root / tree / "CMakeLists.txt")
        << "cmake_minimum_required(VERSION 3.20)\nproject(tiny CXX)\nadd_executable(tiny main.cpp)\n";
    std::ofstream(root / tree / "main.cpp") << "#include <cstdio>\nint main() { std::puts(\"tiny\"); }\n";
  }
  RepoConfig config;
  config.build_commands = {"cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release", "cmake --build build"};
  std::atomic<bool> stop{false};
  std::string output, cache;
  double seconds = 0;
  ASSERT_EQ(build_checkout(config, root / "a", stop, output, seconds, root / "ccache", &cache), "") << output;
  ASSERT_NE(cache.find("ccache ("), std::string::npos) << cache;
  ASSERT_EQ(build_checkout(config, root / "b", stop, output, seconds, root / "ccache", &cache), "") << output;
  common::ChildSpec stats = common::shell("ccache --print-stats", root, 30);
  stats.env = {{"CCACHE_DIR", (root / "ccache").string()}};
  common::ChildOutcome outcome = common::run_child(stats, stop);
  ASSERT_TRUE(outcome.ok()) << outcome.output_tail;
  auto counter = [&](const std::string& name) {
    std::size_t at = outcome.output_tail.find("\n" + name + "\t");
    return at == std::string::npos ? -1 : std::stoll(outcome.output_tail.substr(at + name.size() + 2));
  };
  // What tree a compiled (CMake's compiler checks too), tree b found.
  EXPECT_GE(counter("cache_miss"), 1) << outcome.output_tail;
  EXPECT_EQ(counter("direct_cache_hit") + counter("preprocessed_cache_hit"), counter("cache_miss"))
      << outcome.output_tail;
  // Without a cache directory the build is plain.
  EXPECT_TRUE(compiler_cache_env({}, root / "a", cache).empty());
  EXPECT_EQ(cache, "none");
  fs::remove_all(root);
}

// A scratch git repository for the build-tree tests, with commits made by
// writing files.
class ScratchRepo {
 public:
  ScratchRepo() : root_(kw::testing::make_temp_dir("kw-built")) {
    fs::create_directories(repo());
    git("init -q -b main");
  }
  ~ScratchRepo() { fs::remove_all(root_); }
  fs::path root() const { return root_; }
  fs::path repo() const { return root_ / "repo"; }
  std::string commit(const std::map<std::string, std::string>& files, const std::string& message) {
    for (const auto& [name, text] : files) std::ofstream(repo() / name) << text;
    git("add -A");
    git("commit -qm '" + message + "'");
    return git("rev-parse HEAD").substr(0, 40);
  }

 private:
  std::string git(const std::string& args) const {
    ChildOutcome outcome = run_child(shell("git -c user.name=t -c user.email=t@t " + args, repo(), 60), {});
    EXPECT_TRUE(outcome.ok()) << args << ": " << outcome.output_tail;
    return outcome.output_tail;
  }
  fs::path root_;
};

// A branch builds each next commit in its own tree, incrementally; a tree
// that built a commit serves it as a pull request's base until the branch
// moves on, then the base is built in a tree of its own. The bench links the
// project's shared library through an absolute RUNPATH into its build tree,
// which is why trees are never moved.
TEST(BuiltCommits, ABranchBuildsItsNextCommitIncrementallyAndBasesStayLoadable) {
  ScratchRepo scratch;
  const fs::path repo = scratch.repo();
  std::map<std::string, std::string> files = {
      {"CMakeLists.txt",
       "cmake_minimum_required(VERSION 3.20)\nproject(tiny CXX)\nadd_library(kernels SHARED kernels.cpp)\n"
       "add_executable(bench main.cpp)\ntarget_link_libraries(bench PRIVATE kernels)\n"},
      {"kernels.cpp", "int answer() { return 42; }\n"},
      {"main.cpp", "int answer();\nint main() { return answer() == 42 ? 0 : 1; }\n"},
      {".gitignore", "build/\n"},
      {"kernelwatch.json",
       R"({"project": "tiny", "build": {"commands": ["cmake -S . -B build -G Ninja", "cmake --build build"]},
           "benches": [{"name": "b", "path": "build/bench"}]})"}};
  const std::string first = scratch.commit(files, "first");

  std::vector<std::string> lines;
  auto log = [&](const std::string& line) { lines.push_back(line); };
  std::atomic<bool> stop{false};
  auto build = [&](const BuildTree& tree) {
    std::string output;
    double seconds = 0;
    EXPECT_EQ(
        build_checkout(load_repo_config(tree.path / "kernelwatch.json"), tree.path, stop, output, seconds),
        "")
        << output;
    return output;
  };
  auto bench_runs = [&](const fs::path& tree) {
    return run_child(shell("./build/bench", tree, 30), stop).ok();
  };

  BuiltCommits built(scratch.root() / "built", 3, {});
  BuildTree main_tree = built.checkout_for(repo, "tiny", "main", first, log);
  EXPECT_EQ(main_tree.path.parent_path(), scratch.root() / "built");
  EXPECT_EQ(main_tree.built_from, "");
  build(main_tree);
  built.finish(repo, main_tree, first, true);

  // A pull request based on `first` takes main's tree, and its bench loads.
  std::string why;
  std::optional<fs::path> base = built.get(repo, first, stop, log, why);
  ASSERT_TRUE(base) << why;
  EXPECT_EQ(*base, main_tree.path);
  EXPECT_TRUE(bench_runs(*base));
  built.finish(repo, main_tree, first, true);

  // The next main commit builds in the same tree: only what it changed.
  files["kernels.cpp"] = "int answer() { return 40 + 2; }\n";
  const std::string second = scratch.commit({{"kernels.cpp", files["kernels.cpp"]}}, "second");
  BuildTree next = built.checkout_for(repo, "tiny", "main", second, log);
  EXPECT_EQ(next.path, main_tree.path);
  EXPECT_EQ(next.built_from, first);
  EXPECT_NE(lines.back().find("incremental"), std::string::npos) << lines.back();
  std::string output = build(next);
  EXPECT_NE(output.find("kernels.cpp.o"), std::string::npos) << output;
  EXPECT_EQ(output.find("main.cpp.o"), std::string::npos) << output;
  EXPECT_TRUE(bench_runs(next.path));
  built.finish(repo, next, second, true);

  // `first` is no longer held by main's tree: it is built in its own, and
  // its bench loads its own library.
  base = built.get(repo, first, stop, log, why);
  ASSERT_TRUE(base) << why;
  EXPECT_EQ(*base, scratch.root() / "built" / first);
  EXPECT_TRUE(bench_runs(*base));
  built.finish(repo, next, second, true);

  // A re-run of `second` builds where it was built: nothing to compile.
  BuildTree rerun = built.checkout_for(repo, "tiny", "main", second, log);
  EXPECT_EQ(rerun.path, main_tree.path);
  EXPECT_EQ(rerun.built_from, second);
  EXPECT_NE(build(rerun).find("no work to do"), std::string::npos);
  built.finish(repo, rerun, second, true);

  // Another branch gets its own tree; over the capacity of 3 the least
  // recently used tree goes (the commit tree of `first`, used before main's).
  fs::path first_tree = scratch.root() / "built" / first;
  BuildTree feature = built.checkout_for(repo, "tiny", "feature/x", second, log);
  EXPECT_EQ(feature.path, main_tree.path) << "a built commit is taken where it is";
  built.finish(repo, feature, second, true);
  const std::string third = scratch.commit({{"main.cpp", files["main.cpp"] + "// third\n"}}, "third");
  feature = built.checkout_for(repo, "tiny", "feature/x", third, log);
  EXPECT_NE(feature.path, main_tree.path);
  EXPECT_NE(feature.path.filename().string().find("feature_x"), std::string::npos) << feature.path;
  build(feature);
  built.finish(repo, feature, third, true);
  EXPECT_TRUE(fs::exists(first_tree));
  const std::string fourth = scratch.commit({{"main.cpp", files["main.cpp"] + "// fourth\n"}}, "fourth");
  BuildTree fresh = built.checkout_for(repo, "tiny", "fresh", fourth, log);
  built.finish(repo, fresh, fourth, true);
  EXPECT_FALSE(fs::exists(first_tree));
  EXPECT_FALSE(fs::exists(scratch.root() / "built" / (first + ".kw")));
  for (const fs::path& kept : {main_tree.path, feature.path, fresh.path})
    EXPECT_TRUE(fs::exists(kept)) << kept;

  // A branch tree whose build failed stays for the branch's next commit; a
  // commit tree whose build failed is removed.
  const std::string fifth = scratch.commit({{"main.cpp", "does not compile\n"}}, "fifth");
  BuildTree failing = built.checkout_for(repo, "tiny", "main", fifth, log);
  EXPECT_EQ(failing.path, main_tree.path);
  EXPECT_EQ(failing.built_from, second);
  built.finish(repo, failing, fifth, false);
  EXPECT_TRUE(fs::exists(failing.path / ".git"));
  EXPECT_FALSE(built.get(repo, std::string(40, '0'), stop, log, why));
  EXPECT_NE(why.find("cannot check out 000000000000"), std::string::npos) << why;
}

// Two processes sharing one cache (a job's shards run with `kw run --base`,
// one on each GPU) ask for the same base at once: one builds it, the other
// waits and takes its tree. Without the cache's lock both checked the commit
// out into one worktree and one of them lost its base.
TEST(BuiltCommits, TwoProcessesAskingForOneBaseBuildItOnce) {
  ScratchRepo scratch;
  const fs::path builds = scratch.root() / "builds";
  const std::string config = R"({"project": "shared", "build": {"commands": ["echo built >> )" +
                             builds.string() + R"( && sleep 1"]}, "benches": [{"name": "b", "path": "b"}]})";
  const std::string base = scratch.commit({{"kernelwatch.json", config}}, "base");
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::vector<std::string> lines;
  auto ask = [&](std::optional<fs::path>& tree, std::string& why) {
    // A BuiltCommits of its own, as another process has: its own descriptor of the lock.
    BuiltCommits built(scratch.root() / "built", 4, {});
    tree = built.get(
        scratch.repo(), base, stop,
        [&](const std::string& line) {
          std::lock_guard lock(mutex);
          lines.push_back(line);
        },
        why);
  };
  std::optional<fs::path> first, second;
  std::string first_why, second_why;
  std::thread other([&] { ask(second, second_why); });
  ask(first, first_why);
  other.join();
  std::string said;
  for (const std::string& line : lines) said += line + "\n";
  ASSERT_TRUE(first) << first_why << "\n" << said;
  ASSERT_TRUE(second) << second_why << "\n" << said;
  EXPECT_EQ(*first, *second);
  std::ifstream in(builds);
  const std::string built_lines((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(built_lines, "built\n") << said;
  EXPECT_NE(said.find("another process holds the build cache"), std::string::npos) << said;
  EXPECT_NE(said.find("built commit from the cache"), std::string::npos) << said;
}

// A cache shared by two processes, one base tree each, room for one: the
// second's eviction passes over the tree the first still measures, and
// takes it once the first lets it go. Without the use lock the second
// removed the first's base from under its bench.
TEST(BuiltCommits, AnotherProcessNeverEvictsATreeInUse) {
  ScratchRepo scratch;
  const std::string config =
      R"({"project": "shared", "build": {"commands": ["true"]}, "benches": [{"name": "b", "path": "b"}]})";
  const std::string first = scratch.commit({{"kernelwatch.json", config}}, "first");
  const std::string second = scratch.commit({{"README", "second\n"}}, "second");
  std::atomic<bool> stop{false};
  const auto quiet = [](const std::string&) {};
  const fs::path cache = scratch.root() / "built";
  std::string why;
  // Each its own BuiltCommits, as each process has: its own descriptors.
  auto measuring = std::make_unique<BuiltCommits>(cache, 1);
  const std::optional<fs::path> in_use = measuring->get(scratch.repo(), first, stop, quiet, why);
  ASSERT_TRUE(in_use) << why;

  BuiltCommits other(cache, 1);
  const std::optional<fs::path> its_own = other.get(scratch.repo(), second, stop, quiet, why);
  ASSERT_TRUE(its_own) << why;
  EXPECT_TRUE(fs::exists(*in_use / "kernelwatch.json")) << "evicted while in use";
  BuildTree branch = other.checkout_for(scratch.repo(), "shared", "main", second, quiet);
  other.finish(scratch.repo(), branch, second, true);
  EXPECT_TRUE(fs::exists(*in_use / "kernelwatch.json")) << "evicted while in use";

  measuring.reset();                        // the first process is done with its base
  std::ofstream(cache / "gone.use") << "";  // a use file whose tree was evicted
  BuildTree again = other.checkout_for(scratch.repo(), "shared", "main", second, quiet);
  other.finish(scratch.repo(), again, second, true);
  EXPECT_FALSE(fs::exists(*in_use)) << "kept past the capacity once let go";
  EXPECT_TRUE(fs::exists(again.path / "kernelwatch.json"));
  std::vector<std::string> use_files;
  for (const auto& entry : fs::directory_iterator(cache))
    if (entry.path().extension() == ".use") use_files.push_back(entry.path().filename().string());
  EXPECT_EQ(use_files, std::vector<std::string>{again.path.filename().string() + ".use"});
}

// What an earlier commit left in a branch's tree must not fail the next
// commit's build: an incremental build that fails is retried from scratch,
// and kernelwatch.json's build.clean builds from scratch every time.
TEST(BuiltCommits, AnIncrementalBuildThatFailsIsRetriedFromScratch) {
  ScratchRepo scratch;
  auto config_with = [](const std::string& extra) {
    return R"({"project": "stale", "build": {"commands": ["sh build.sh"])" + extra +
           R"(}, "benches": [{"name": "b", "path": "build/bench"}]})";
  };
  const std::string first = scratch.commit({{".gitignore", "build/\n"},
                                            {"kernelwatch.json", config_with("")},
                                            {"build.sh", "mkdir -p build && echo v1 > build/generated\n"}},
                                           "first");
  // The second commit's build fails on the first's generated file.
  const std::string second =
      scratch.commit({{"build.sh",
                       "test ! -e build/generated || { echo 'build/generated is stale'; exit 1; }\n"
                       "mkdir -p build && echo v2 > build/version\n"}},
                     "second");
  const std::string third =
      scratch.commit({{"kernelwatch.json", config_with(R"(, "clean": true)")}}, "third");

  BuiltCommits built(scratch.root() / "built", 4, {});
  auto run_job = [&](const std::string& commit) {
    BuildTree tree = built.checkout_for(scratch.repo(), "stale", "main", commit, [](const std::string&) {});
    PipelineOptions options;
    options.checkout = tree.path;
    options.built_from = tree.built_from;
    options.clean_build_tree = [&tree] { BuiltCommits::clean(tree); };
    options.commit = commit;
    options.branch = "main";
    options.agent_name = "test";
    json report = run_pipeline(load_repo_config(tree.path / "kernelwatch.json"), options);
    built.finish(scratch.repo(), tree, commit, report["stages"][0]["status"] == "passed");
    return report["stages"][0];
  };
  json build = run_job(first);
  EXPECT_EQ(build["status"], "passed");
  EXPECT_EQ(build["details"]["tree"], (json{{"kind", "fresh"}}));

  build = run_job(second);
  EXPECT_EQ(build["status"], "passed") << build.dump(1);
  EXPECT_EQ(build["details"]["tree"]["kind"], "clean");
  EXPECT_NE(build["details"]["tree"]["reason"].get<std::string>().find("incremental build failed"),
            std::string::npos);
  EXPECT_NE(build["message"].get<std::string>().find("from scratch, after the incremental build failed"),
            std::string::npos);
  const std::string log = build["log_tail"];
  EXPECT_LT(log.find("build/generated is stale"), log.find("from scratch")) << log;

  build = run_job(third);
  EXPECT_EQ(build["status"], "passed");
  EXPECT_EQ(build["details"]["tree"], (json{{"kind", "clean"}, {"reason", "build.clean"}}));

  // A build that fails from scratch too is a build failure, with both logs.
  const std::string fourth = scratch.commit(
      {{"build.sh", "echo 'error: broken'; exit 1\n"}, {"kernelwatch.json", config_with("")}}, "fourth");
  build = run_job(fourth);
  EXPECT_EQ(build["status"], "failed");
  EXPECT_NE(build["message"].get<std::string>().find("`sh build.sh` exited 1"), std::string::npos) << build;
  EXPECT_NE(build["message"].get<std::string>().find("from scratch"), std::string::npos) << build;
  const std::string failed_log = build["log_tail"];
  EXPECT_LT(failed_log.find("error: broken"), failed_log.rfind("error: broken")) << failed_log;
}

}  // namespace
}  // namespace kw::agent
