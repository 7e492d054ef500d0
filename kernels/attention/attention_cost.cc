// attention_cost (kernels/attention/attention.h): plain C++, built with or without CUDA.
#include "kernels/attention/attention.h"

#include <algorithm>

namespace flashserve::kernels {

namespace {

// sum over x in [a, b] of min(x, w) (0 when a > b), in closed form.
double sum_min(double a, double b, double w) {
  if (a > b) return 0;
  const double c = std::min(b, w);  // x in [a, c] contribute x, x in (max(a - 1, w), b] w
  const double below = a <= c ? (a + c) * (c - a + 1) / 2 : 0;
  return below + w * std::max(0.0, b - std::max(a - 1, w));
}

}  // namespace

AttentionCost attention_cost(const int32_t* cu_seqlens_q, const int32_t* seqlens_k,
                             int num_seqs, int num_heads, int num_kv_heads, int head_dim,
                             int element_bytes, bool causal, int sliding_window) {
  const bool window = causal && sliding_window > 0;
  double pairs = 0, queries = 0, keys = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const double q = cu_seqlens_q[s + 1] - cu_seqlens_q[s];
    const double k = seqlens_k[s];
    if (window) {
      // Query i sees min(position + 1, W) keys, position = k - q + i: summed over i, and the
      // keys some query sees are the last min(k, q + W - 1).
      pairs += sum_min(k - q + 1, k, sliding_window);
      keys += q > 0 ? std::min(k, q + sliding_window - 1) : 0;
    } else {
      // Causal: query i (0-based) sees k - q + i + 1 keys; summed over i.
      pairs += causal ? q * (k - q) + q * (q + 1) / 2 : q * k;
      keys += k;
    }
    queries += q;
  }
  const double d = head_dim;
  AttentionCost c;
  c.flops = 4 * d * num_heads * pairs;
  c.bytes = element_bytes * d * (2 * num_heads * queries + 2 * num_kv_heads * keys);
  return c;
}

}  // namespace flashserve::kernels
