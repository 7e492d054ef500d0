#pragma once
// Division by a divisor fixed for a whole kernel (the row blocks of a sequence, the heads,
// the heads of a KV group, the grid) as a multiply-high and a shift: Granlund and Montgomery,
// "Division by invariant integers using multiplication" (PLDI 1994), section 4. A 32-bit
// integer division by a register compiles to ~20 SASS instructions (float reciprocal, two
// multiply corrections, and for signed operands IABS and sign fix-ups); the persistent
// attention walk computes several of them for every tile in every role (bench/attention/
// NOTES.md, session 52 call N: 0.54 M IABS at s512). This one is 3.
//
// With l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1 (< 2^32 for 1 <= d < 2^31),
// floor(n / d) = (n + mulhi(m, n)) >> l for every 0 <= n < 2^32 (their theorem 4.2; the sum
// is formed here in 64 bits, so no operand range is assumed beyond n < 2^32). d = 1 gives
// l = 0, m = 1 and mulhi = 0; d = 2^k gives m = 1 and a plain shift.
//
// Plain C++: constructed and tested on the host (its test), constructed once per thread at a
// kernel's start and used in its loops on the device.
#include <cstdint>

#if defined(__CUDACC__)
#define FS_DIVMOD_HD __host__ __device__ __forceinline__
#else
#define FS_DIVMOD_HD inline
#endif

namespace flashserve::kernels {

struct FastDivmod {
  uint32_t divisor = 1, mul = 1, shift = 0;

  FastDivmod() = default;
  // d in [1, 2^31).
  FS_DIVMOD_HD explicit FastDivmod(int d) : divisor(static_cast<uint32_t>(d)) {
    uint32_t l = 0;
    while ((uint64_t{1} << l) < divisor) ++l;
    shift = l;
    mul = static_cast<uint32_t>((uint64_t{1} << 32) * ((uint64_t{1} << l) - divisor) / divisor +
                                1);
  }

  FS_DIVMOD_HD static uint32_t mulhi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return static_cast<uint32_t>((uint64_t{a} * b) >> 32);
#endif
  }

  // floor(n / divisor), n >= 0.
  FS_DIVMOD_HD int div(int n) const {
    const uint32_t u = static_cast<uint32_t>(n);
    return static_cast<int>((uint64_t{u} + mulhi(mul, u)) >> shift);
  }
  // n / divisor and n % divisor, n >= 0.
  FS_DIVMOD_HD int divmod(int n, int& rem) const {
    const int q = div(n);
    rem = n - q * static_cast<int>(divisor);
    return q;
  }
};

}  // namespace flashserve::kernels
