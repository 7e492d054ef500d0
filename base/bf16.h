#pragma once
// fp32 <-> bf16 on the host: the one rounding that every host-side producer of bf16 uses (the
// CUDA backend's weight upload, the GGUF writer, the CPU references of bf16 kernels, tests).
// Device code rounds with the hardware conversion instead (kernels/cuda_plumbing.cuh), which
// gives the same bits for every non-NaN input. Header-only, C++17 (nvcc compiles it too).
#include <cstdint>
#include <cstring>

namespace flashserve {

// Round to nearest, ties to even (as __float2bfloat16_rn). A NaN stays a quiet NaN of the same
// sign; infinities and values that round past the largest bf16 become infinities.
inline uint16_t fp32_to_bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Exact: every bf16 value is an fp32 value.
inline float bf16_bits_to_fp32(uint16_t bits) {
  const uint32_t u = uint32_t{bits} << 16;
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

// x rounded to the nearest bf16, as an fp32 value.
inline float round_to_bf16(float x) { return bf16_bits_to_fp32(fp32_to_bf16_bits(x)); }

}  // namespace flashserve
