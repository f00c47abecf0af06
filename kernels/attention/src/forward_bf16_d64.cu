// Instantiations for head dim 64, bf16: causal and not.
#include "launch.cuh"

namespace kw::attention {
KW_ATTENTION_INSTANTIATIONS(, 64, __nv_bfloat16)
}  // namespace kw::attention
