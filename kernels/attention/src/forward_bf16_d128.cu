// Instantiations for head dim 128, bf16: causal and not.
#include "launch.cuh"

namespace kw::attention {
KW_ATTENTION_INSTANTIATIONS(, 128, __nv_bfloat16)
}  // namespace kw::attention
