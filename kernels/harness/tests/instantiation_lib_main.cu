// Half of a library whose entry point uses launch_scale<3>, declared here and
// defined in instantiation_lib_impl.cu. With the explicit instantiation there
// the library loads; without it (KW_SELFTEST_MISSING_INSTANTIATION) the shared
// object links but dlopen(RTLD_NOW) fails on the undefined symbol.
#include <cuda_runtime.h>

template <int Factor>
void launch_scale(const float* x, float* y, std::size_t n, cudaStream_t stream);

extern "C" void kw_selftest_entry(const float* x, float* y, std::size_t n, cudaStream_t stream) {
  launch_scale<3>(x, y, n, stream);
}
