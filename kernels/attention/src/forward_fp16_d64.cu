// Instantiations for head dim 64, fp16: causal and not.
#include "launch.cuh"

namespace kw::attention {
KW_ATTENTION_INSTANTIATIONS(, 64, __half)
}  // namespace kw::attention
