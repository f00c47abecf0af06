// The Debian packages `cpack` makes from this build, unpacked and run: kw
// needs only the C library, and an installed kw-server serves its dashboard
// and, at /download/kw, the kw it ships, which CI jobs fetch and run.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "e2e.hpp"

namespace kw::testing {
namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

class PackageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(make_temp_dir("kw-package"));
    auto packed =
        run_command({"bash", "-c",
                     "cd '" KW_BUILD_DIR "' && '" KW_CPACK "' -G DEB -B '" + dir_->string() + "/out' 2>&1"});
    ASSERT_EQ(packed.exit_code, 0) << packed.output;
    for (const char* name : {"kw", "kw-server"}) {
      fs::path deb = package(name);
      ASSERT_TRUE(fs::exists(deb)) << name << "'s package was not made:\n" << packed.output;
      auto unpacked = run_command({"dpkg-deb", "-x", deb.string(), (*dir_ / "root").string()});
      ASSERT_EQ(unpacked.exit_code, 0) << unpacked.output;
    }
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  // NAME_VERSION_ARCH.deb
  static fs::path package(const std::string& name) {
    for (const auto& entry : fs::directory_iterator(*dir_ / "out")) {
      const std::string file = entry.path().filename().string();
      if (file.rfind(name + "_" KW_VERSION "_", 0) == 0 && entry.path().extension() == ".deb") return entry;
    }
    return {};
  }
  static std::string field(const std::string& name, const std::string& key) {
    auto result = run_command({"dpkg-deb", "-f", package(name).string(), key});
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return first_line(result.output);
  }
  static fs::path root() { return *dir_ / "root"; }

  static fs::path* dir_;
};

fs::path* PackageTest::dir_ = nullptr;

TEST_F(PackageTest, TheKwPackageNeedsOnlyTheCLibrary) {
  const std::string depends = field("kw", "Depends");
  EXPECT_EQ(depends.rfind("libc6 (>= 2.", 0), 0u) << depends;
  EXPECT_EQ(depends.find(','), std::string::npos) << "kw depends on more than libc6: " << depends;
  auto libraries = run_command({"ldd", (root() / "usr/bin/kw").string()});
  for (const char* library : {"libstdc++", "libgcc_s", "libssl", "libcrypto"}) {
    EXPECT_EQ(libraries.output.find(library), std::string::npos) << "kw links " << library << ":\n"
                                                                 << libraries.output;
  }
  EXPECT_EQ(run_command({(root() / "usr/bin/kw").string(), "--version"}).output, "kw " KW_VERSION "\n");
}

TEST_F(PackageTest, TheServerPackageNeedsThePostgresqlServer) {
  const std::string depends = field("kw-server", "Depends");
  EXPECT_NE(depends.find("postgresql"), std::string::npos) << depends;
  EXPECT_NE(depends.find("libpqxx"), std::string::npos) << depends;
}

TEST_F(PackageTest, AnInstalledServerServesItsDashboardAndTheKwItShips) {
  const fs::path share = root() / "usr/share/kernelwatch";
  // Marks the installed copies, so what is served is seen to come from
  // ../share/kernelwatch and not from the build tree (an ELF runs with bytes
  // appended).
  std::ofstream(share / "dashboard/index.html", std::ios::app) << "<!-- installed -->\n";
  std::ofstream(share / "kw", std::ios::app | std::ios::binary) << "installed";
  ServerUnderTest server({}, (root() / "usr/bin/kw-server").string());
  server.start();
  auto client = server.client();

  auto download = client.get("/download/kw");
  ASSERT_EQ(download.status, 200) << download.body.substr(0, 300);
  EXPECT_EQ(download.headers["content-type"], "application/octet-stream");
  ASSERT_TRUE(download.body == read_file(share / "kw")) << "/download/kw is not the kw the package ships";
  const fs::path saved = *dir_ / "downloaded" / "kw";
  fs::create_directories(saved.parent_path());
  std::ofstream(saved, std::ios::binary) << download.body;
  fs::permissions(saved, fs::perms::owner_all);

  // What the CI templates run: the checksum file verifies the download.
  auto checksum = client.get("/download/kw.sha256");
  ASSERT_EQ(checksum.status, 200) << checksum.body;
  std::ofstream(saved.parent_path() / "kw.sha256") << checksum.body;
  auto verified =
      run_command({"bash", "-c", "cd '" + saved.parent_path().string() + "' && sha256sum -c kw.sha256"});
  EXPECT_EQ(verified.exit_code, 0) << verified.output;
  EXPECT_EQ(checksum.body.substr(0, 64), download.headers["x-kw-sha256"]);
  EXPECT_EQ(run_command({saved.string(), "--version"}).output, "kw " KW_VERSION "\n");

  auto index = client.get("/");
  ASSERT_EQ(index.status, 200);
  EXPECT_EQ(index.body, read_file(share / "dashboard/index.html"));
}

TEST(DownloadTest, AServerWithoutItsKwSaysWhereItLooked) {
  ServerUnderTest server({"--kw-binary", "/nonexistent/kw"});
  server.start();
  auto response = server.client().get("/download/kw");
  EXPECT_EQ(response.status, 404);
  EXPECT_EQ(response.json().value("error", ""), "kw_unavailable") << response.body;
  EXPECT_NE(response.json().value("message", "").find("/nonexistent/kw"), std::string::npos) << response.body;
}

}  // namespace
}  // namespace kw::testing
