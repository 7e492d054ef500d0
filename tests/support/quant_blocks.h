#pragma once
// Random tensors in ggml's quantized block formats (kernels/quant/quant_layout.h) for the
// quantized-kernel tests: every quant bit random, fp16 scales of random sign and mantissa
// within a range that keeps the weights ~0.01-0.1 (as a model's), one block in 16 with a
// zero scale. The bytes are the test input; what they mean comes from the references.
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/quant/quant_layout.h"

namespace flashserve::kernels::testing {

// fp16 bits with a random mantissa, exponent in [lo, hi] (value 2^(e - 15) * 1.m) and,
// when `sign`, a random sign.
inline uint16_t random_half(std::mt19937& rng, int lo, int hi, bool sign) {
  std::uniform_int_distribution<int> e(lo, hi), mant(0, 1023), s(0, 1);
  return static_cast<uint16_t>((sign && s(rng) ? 0x8000 : 0) | (e(rng) << 10) | mant(rng));
}

inline void put_half(uint8_t* p, uint16_t h) {
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// num_rows * k / block_elements(f) random blocks of format f, rows one after another.
inline std::vector<uint8_t> random_ggml_tensor(WeightFormat f, int64_t num_rows, int64_t k,
                                               std::mt19937& rng) {
  const int64_t be = weight_block_elements(f), bb = weight_block_bytes(f);
  const int64_t num_blocks = num_rows * k / be;
  std::vector<uint8_t> t(static_cast<size_t>(num_blocks * bb));
  std::uniform_int_distribution<int> byte(0, 255), one_in(0, 15);
  for (uint8_t& b : t) b = static_cast<uint8_t>(byte(rng));
  for (int64_t i = 0; i < num_blocks; ++i) {
    uint8_t* b = t.data() + i * bb;
    const bool zero = one_in(rng) == 0;
    auto scale = [&](int lo, int hi, bool sign) {
      return zero ? uint16_t{0} : random_half(rng, lo, hi, sign);
    };
    switch (f) {
      case WeightFormat::kQ8_0: put_half(b, scale(3, 5, true)); break;   // ~2^-12..2^-10
      case WeightFormat::kQ4_0: put_half(b, scale(6, 8, true)); break;   // ~2^-9..2^-7
      case WeightFormat::kQ4_1:
        put_half(b, scale(6, 8, false));
        put_half(b + 2, scale(9, 10, true));  // the block minimum, ~ -0.05
        break;
      case WeightFormat::kQ4_K:
      case WeightFormat::kQ5_K:
        put_half(b, scale(1, 3, false));      // d: times 6-bit scales
        put_half(b + 2, scale(1, 3, false));  // dmin
        break;
      case WeightFormat::kQ6_K: put_half(b + 208, scale(1, 2, false)); break;  // times int8 scales
      case WeightFormat::kBf16: break;
    }
  }
  return t;
}

}  // namespace flashserve::kernels::testing
