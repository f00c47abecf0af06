// Every valid gzip body inflates, exactly: random and report-shaped bodies
// from 0 B to 64 MiB, random to all-zero, compressed by kw itself, GNU gzip
// and zlib (through python3), one to 64 members. KW_GZIP_PROPERTY_BODIES
// sets how many (tools/gzip-property.sh runs 10,000 for docs/PERFORMANCE.md).
#include "kw/http/gzip.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using kw::http::gzip_compress;
using kw::http::gzip_decompress;

constexpr std::size_t kDecodedLimit = std::size_t{64} << 20;

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A body of `size` bytes whose compressibility `kind` picks: 0 random bytes,
// 1 a few letters, 2 a report's numbers, 3 long runs, 4 all zero.
std::string make_body(std::mt19937_64& rng, std::size_t size, int kind) {
  std::string body;
  body.reserve(size);
  switch (kind) {
    case 0:
      while (body.size() < size) body.push_back(static_cast<char>(rng()));
      break;
    case 1: {
      const int letters = 2 + static_cast<int>(rng() % 14);
      while (body.size() < size) body.push_back(static_cast<char>('a' + rng() % letters));
      break;
    }
    case 2: {
      std::normal_distribution<double> time(12345.0, 80.0);
      std::ostringstream out;
      out << "{\"cases\":[{\"name\":\"attention.fwd\",\"samples_ns\":[";
      while (static_cast<std::size_t>(out.tellp()) < size) out << time(rng) << ",";
      body = out.str();
      body.resize(size);
      break;
    }
    case 3:
      while (body.size() < size)
        body.append(std::min<std::size_t>(size - body.size(), 1 + rng() % 5000),
                    static_cast<char>('A' + rng() % 4));
      break;
    default:
      body.assign(size, '\0');
  }
  return body;
}

std::size_t pick_size(std::mt19937_64& rng) {
  // Log-uniform to 256 KiB, so most bodies are small and every length class
  // shows; the large ones are added apart.
  const double exponent = std::uniform_real_distribution<double>(0.0, 18.0)(rng);
  return rng() % 50 == 0 ? 0 : static_cast<std::size_t>(std::exp2(exponent));
}

struct Body {
  std::string data;
  std::string compressed;
  std::string how;
};

// Compresses every file of `dir` named in*.bin with `command`, which leaves
// the result at the same name with .gz appended.
void compress_all(const fs::path& dir, const std::string& command) {
  const std::string line = "cd '" + dir.string() + "' && " + command;
  ASSERT_EQ(std::system(line.c_str()), 0) << line;
}

TEST(GzipProperty, EveryValidBodyInflatesExactly) {
  std::size_t count = 3000;
  if (const char* env = std::getenv("KW_GZIP_PROPERTY_BODIES")) count = std::strtoul(env, nullptr, 10);
  std::mt19937_64 rng(20261207);
  const fs::path dir = fs::temp_directory_path() / ("kw-gzip-property-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  // GNU gzip at levels 1 (-n: no name in the header), 6 and 9, and zlib.
  const std::vector<std::string> places = {"gnu-1", "gnu-6", "gnu-9", "zlib"};
  for (const std::string& place : places) fs::create_directories(dir / place);

  std::vector<Body> bodies;
  // Bodies for the system's compressors are written out and compressed in
  // two processes, not one process a body.
  std::vector<std::pair<std::size_t, std::string>> external;  // index, one of `places`
  for (std::size_t i = 0; i < count; ++i) {
    Body body;
    body.data = make_body(rng, pick_size(rng), static_cast<int>(rng() % 5));
    const int compressor = static_cast<int>(rng() % 3);
    if (compressor == 0) {
      const int level = 1 + static_cast<int>(rng() % 9);
      body.compressed = gzip_compress(body.data, level);
      body.how = "kw level " + std::to_string(level);
    } else {
      const std::string where = compressor == 1 ? places[rng() % 3] : "zlib";
      std::ofstream(dir / where / ("in" + std::to_string(i) + ".bin"), std::ios::binary) << body.data;
      external.emplace_back(i, where);
      body.how = where;
    }
    bodies.push_back(std::move(body));
  }
  // The large ones, each the size the server allows at most or near it.
  for (const auto& [size, kind] : std::vector<std::pair<std::size_t, int>>{{kDecodedLimit, 4},
                                                                           {kDecodedLimit - 1, 3},
                                                                           {std::size_t{20} << 20, 4},
                                                                           {std::size_t{20} << 20, 2},
                                                                           {std::size_t{20} << 20, 1},
                                                                           {std::size_t{8} << 20, 0}}) {
    const std::size_t i = bodies.size();
    const std::string& where = places[i % 3];
    Body body{make_body(rng, size, kind), {}, where};
    std::ofstream(dir / where / ("in" + std::to_string(i) + ".bin"), std::ios::binary) << body.data;
    external.emplace_back(i, where);
    bodies.push_back(std::move(body));
  }
  compress_all(dir / "gnu-1", "ls | xargs -r gzip -1 -n");
  compress_all(dir / "gnu-6", "ls | xargs -r gzip -6");
  compress_all(dir / "gnu-9", "ls | xargs -r gzip -9");
  compress_all(
      dir / "zlib",
      "python3 -c 'import glob, random, zlib\n"
      "random.seed(7)\n"
      "for name in glob.glob(\"in*.bin\"):\n"
      "    data = open(name, \"rb\").read()\n"
      "    c = zlib.compressobj(random.randint(0, 9), zlib.DEFLATED, 31, random.randint(1, 9),\n"
      "                         random.choice([zlib.Z_DEFAULT_STRATEGY, zlib.Z_FILTERED, zlib.Z_RLE, "
      "zlib.Z_HUFFMAN_ONLY]))\n"
      "    open(name + \".gz\", \"wb\").write(c.compress(data) + c.flush())\n'");
  for (const auto& [i, where] : external)
    bodies[i].compressed = file_bytes(dir / where / ("in" + std::to_string(i) + ".bin.gz"));
  fs::remove_all(dir);

  // Members: a body cut into up to 64 pieces, each compressed on its own
  // and the members joined, as `cat a.gz b.gz` makes them.
  for (std::size_t i = 0; i < count / 10; ++i) {
    Body body;
    body.data = make_body(rng, pick_size(rng), static_cast<int>(rng() % 5));
    const std::size_t members = 1 + rng() % 64;
    std::size_t at = 0;
    for (std::size_t m = 0; m < members; ++m) {
      const std::size_t end = m + 1 == members
                                  ? body.data.size()
                                  : std::min(body.data.size(), at + rng() % (body.data.size() + 1));
      body.compressed +=
          gzip_compress(std::string_view(body.data).substr(at, end - at), 1 + static_cast<int>(rng() % 9));
      at = end;
    }
    body.how = std::to_string(members) + " members";
    bodies.push_back(std::move(body));
  }

  std::size_t refused = 0;
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    const Body& body = bodies[i];
    try {
      const std::string inflated = gzip_decompress(body.compressed, kDecodedLimit);
      if (inflated != body.data) {
        ++refused;
        ADD_FAILURE() << "body " << i << " (" << body.data.size() << " B, " << body.how
                      << ") inflated to other bytes";
      }
    } catch (const std::exception& error) {
      ++refused;
      ADD_FAILURE() << "body " << i << " (" << body.data.size() << " B, " << body.how
                    << "): " << error.what();
    }
  }
  std::printf("gzip property: %zu of %zu valid bodies refused or changed\n", refused, bodies.size());
  EXPECT_EQ(refused, 0u);
}

}  // namespace
