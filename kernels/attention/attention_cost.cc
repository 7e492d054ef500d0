// attention_cost (kernels/attention/attention.h): plain C++, built with or without CUDA.
#include "kernels/attention/attention.h"

namespace flashserve::kernels {

AttentionCost attention_cost(const int32_t* cu_seqlens_q, const int32_t* seqlens_k,
                             int num_seqs, int num_heads, int num_kv_heads, int head_dim,
                             int element_bytes, bool causal) {
  double pairs = 0, queries = 0, keys = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const double q = cu_seqlens_q[s + 1] - cu_seqlens_q[s];
    const double k = seqlens_k[s];
    // Causal: query i (0-based) sees k - q + i + 1 keys; summed over i.
    pairs += causal ? q * (k - q) + q * (q + 1) / 2 : q * k;
    queries += q;
    keys += k;
  }
  const double d = head_dim;
  AttentionCost c;
  c.flops = 4 * d * num_heads * pairs;
  c.bytes = element_bytes * d * (2 * num_heads * queries + 2 * num_kv_heads * keys);
  return c;
}

}  // namespace flashserve::kernels
