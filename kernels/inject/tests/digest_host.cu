// A host program compiled in variants (-D) for host_digest_test: a kernel
// changing (its image changes size, the host code's addresses move) or the
// checkout it is built in leaves the host digest alone; a change to the
// host code or to a constant it reads moves it.
#include <cstdio>
#include <typeinfo>

__global__ void k1(float* p) {
  p[threadIdx.x] *= 2.0f;
}

__global__ void k2(float* p) {
#ifdef K2_CHANGED
  for (int i = 0; i < 64; ++i) p[threadIdx.x] += 3.0f * static_cast<float>(i);
#else
  p[threadIdx.x] += 2.0f;
#endif
}

static const int kTiles[] = {64, 128, 256};
// A named object holding the path of the checkout it was built in.
static const char kSource[] = __FILE__;
int g_counter = 5;

// nvcc names this namespace after the source file's path, and so the type
// names of what it holds.
namespace {
struct Tiles {
  virtual ~Tiles() = default;
  virtual int of(int argc) const { return kTiles[argc % 3]; }
};
__attribute__((noinline)) int tile_of(int argc) {
  const Tiles tiles;
  return typeid(tiles).name()[0] == 0 ? 0 : tiles.of(argc);
}
}  // namespace

int main(int argc, char**) {
  float* p = nullptr;
  if (cudaMalloc(&p, 1024) != cudaSuccess) return 1;
#ifdef HOST_CHANGED
  k1<<<2, 128>>>(p);
#else
  k1<<<1, 128>>>(p);
#endif
  k2<<<1, tile_of(argc)>>>(p);
#ifdef HOST_CONSTANT_CHANGED
  const float scale = static_cast<float>(argc) * 0.38f;
#else
  const float scale = static_cast<float>(argc) * 0.37f;
#endif
  std::printf("%d %f %s %s\n", g_counter, static_cast<double>(scale), __FILE__, kSource);
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
