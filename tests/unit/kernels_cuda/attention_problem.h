#pragma once
// Random paged-attention problems for the CUDA attention tests and benchmark: host data
// rounded to bf16/fp16 (so the fp32 CPU reference sees exactly the kernel's inputs), a
// shuffled block table, NaN in every cache row no sequence owns, device copies, and error
// measures. With a sliding window, the table entries of blocks wholly before the window of a
// sequence's first query name a spare all-NaN block (kernels/attention/attention.h: the fused
// kernels never read them). Host-only C++ (CUDA runtime API, no device code).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "base/bf16.h"
#include "kernels/attention/attention.h"
#include "kernels/cpu/attention_ref.h"
#include "kernels/device.h"

namespace flashserve::kernels::testing {

#define FS_CUDA_OR_DIE(expr)                                                                 \
  do {                                                                                       \
    const cudaError_t e_ = (expr);                                                           \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

// Skips a GPU test where no CUDA device is visible (ctest then reports it as skipped).
#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

// The Hopper kernels' tests run only on compute capability 9.0.
inline bool device_is_hopper() {
  int major = 0, minor = 0;
  FS_CUDA_OR_DIE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  FS_CUDA_OR_DIE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  return major == 9 && minor == 0;
}

// n random bf16 values ~ N(0, scale^2), as bits and as their exact float values.
struct Bf16Data {
  std::vector<uint16_t> bits;
  std::vector<float> values;
};
inline Bf16Data random_bf16(size_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, scale);
  Bf16Data d;
  for (size_t i = 0; i < n; ++i) {
    d.bits.push_back(fp32_to_bf16_bits(dist(rng)));
    d.values.push_back(bf16_bits_to_fp32(d.bits.back()));
  }
  return d;
}
// fp32 <-> fp16, round to nearest even (NaN stays NaN); bf16 is base/bf16.h's.
inline uint16_t float_to_fp16(float f) {
  if (std::isnan(f)) return 0x7e00;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const float a = std::fabs(f);
  if (a >= 65520.f) return static_cast<uint16_t>(sign | 0x7c00);
  if (a < 6.103515625e-05f) {  // subnormal: multiples of 2^-24, rint rounds to even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.f)));
  }
  uint32_t v;
  std::memcpy(&v, &a, 4);
  v += 0xfff + ((v >> 13) & 1);
  const uint32_t exp = (v >> 23) - 127 + 15;
  return static_cast<uint16_t>(sign | (exp << 10) | ((v >> 13) & 0x3ff));
}
inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    f = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    f = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  }
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u |= sign;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t to_half_bits(DType t, float f) {
  return t == DType::kBf16 ? fp32_to_bf16_bits(f) : float_to_fp16(f);
}
inline float from_half_bits(DType t, uint16_t h) {
  return t == DType::kBf16 ? bf16_bits_to_fp32(h) : fp16_to_float(h);
}
inline const char* dtype_name(DType t) { return t == DType::kBf16 ? "bf16" : "fp16"; }

// A device allocation that frees itself.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) FS_CUDA_OR_DIE(cudaMalloc(&ptr_, bytes));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  // Every byte 0xff: NaN as bf16, fp16 and fp32.
  void poison() const { FS_CUDA_OR_DIE(cudaMemset(ptr_, 0xff, bytes_)); }
  template <typename T>
  static DeviceBuffer from(const std::vector<T>& host) {
    DeviceBuffer b(host.size() * sizeof(T));
    if (!host.empty()) {
      FS_CUDA_OR_DIE(cudaMemcpy(b.ptr_, host.data(), b.bytes_, cudaMemcpyHostToDevice));
    }
    return b;
  }
  template <typename T>
  std::vector<T> to_host() const {
    std::vector<T> host(bytes_ / sizeof(T));
    if (!host.empty()) {
      FS_CUDA_OR_DIE(cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost));
    }
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct ProblemShape {
  DType dtype = DType::kBf16;
  int head_dim = 128;
  int num_heads = 8;
  int num_kv_heads = 2;
  bool causal = true;
  int sliding_window = 0;    // AttentionParams::sliding_window
  std::vector<int> q_lens;   // per sequence
  std::vector<int> kv_lens;  // per sequence, >= q_lens
};

// Host (fp32 values of the rounded 16-bit inputs) and device copies of one problem.
struct Problem {
  ProblemShape shape;
  int num_tokens = 0, num_blocks = 0, max_blocks_per_seq = 0, max_q = 0, max_k = 0;
  std::vector<float> q, k_cache, v_cache;  // fp32 values of the 16-bit data
  std::vector<int32_t> cu_seqlens_q, seqlens_k, block_tables;
  DeviceBuffer d_q, d_k, d_v, d_cu, d_seqlens, d_tables;

  // Fills a 16-bit device buffer and the fp32 host mirror with the same random values.
  static void fill(DType t, std::mt19937& rng, std::vector<float>& host, size_t n, float scale) {
    std::normal_distribution<float> dist(0.f, scale);
    host.resize(n);
    for (auto& x : host) x = from_half_bits(t, to_half_bits(t, dist(rng)));
  }
  static DeviceBuffer upload_half(DType t, const std::vector<float>& host) {
    std::vector<uint16_t> bits(host.size());
    for (size_t i = 0; i < host.size(); ++i) bits[i] = to_half_bits(t, host[i]);
    return DeviceBuffer::from(bits);
  }

  Problem(const ProblemShape& s, uint32_t seed, bool host_mirror = true) : shape(s) {
    std::mt19937 rng(seed);
    const int num_seqs = static_cast<int>(s.q_lens.size());
    cu_seqlens_q.assign(1, 0);
    for (int i = 0; i < num_seqs; ++i) {
      cu_seqlens_q.push_back(cu_seqlens_q.back() + s.q_lens[i]);
      seqlens_k.push_back(s.kv_lens[i]);
      max_q = std::max(max_q, s.q_lens[i]);
      max_k = std::max(max_k, s.kv_lens[i]);
      max_blocks_per_seq = std::max(max_blocks_per_seq, (s.kv_lens[i] + kBlock - 1) / kBlock);
    }
    max_blocks_per_seq = std::max(max_blocks_per_seq, 1);
    num_tokens = cu_seqlens_q.back();
    // Physical blocks: every sequence's blocks plus a few spare ones, in shuffled order;
    // unused table entries are -1 (a kernel that reads one faults under memcheck).
    int used = 0;
    for (int len : s.kv_lens) used += (len + kBlock - 1) / kBlock;
    num_blocks = used + 3;
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    block_tables.assign(size_t(num_seqs) * max_blocks_per_seq, -1);
    int next = 0;
    for (int i = 0; i < num_seqs; ++i) {
      for (int b = 0; b < (s.kv_lens[i] + kBlock - 1) / kBlock; ++b) {
        block_tables[size_t(i) * max_blocks_per_seq + b] = perm[next++];
      }
    }
    const size_t cache_elems = size_t(num_blocks) * s.num_kv_heads * kBlock * s.head_dim;
    fill(s.dtype, rng, q, size_t(num_tokens) * s.num_heads * s.head_dim, 1.f);
    fill(s.dtype, rng, k_cache, cache_elems, 1.f);
    fill(s.dtype, rng, v_cache, cache_elems, 1.f);
    poison_unowned_rows();
    drop_blocks_before_window(perm[used]);  // a spare block: all NaN
    d_q = upload_half(s.dtype, q);
    d_k = upload_half(s.dtype, k_cache);
    d_v = upload_half(s.dtype, v_cache);
    d_cu = DeviceBuffer::from(cu_seqlens_q);
    d_seqlens = DeviceBuffer::from(seqlens_k);
    d_tables = DeviceBuffer::from(block_tables);
    if (!host_mirror) {
      std::vector<float>().swap(k_cache);
      std::vector<float>().swap(v_cache);
    }
  }

  // NaN in every cache row that no sequence owns (tails of last blocks, spare blocks): any
  // kernel that lets such a row reach an output produces NaN, which never passes.
  void poison_unowned_rows() {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<int> owned_rows(num_blocks, 0);
    for (size_t i = 0; i < shape.kv_lens.size(); ++i) {
      for (int key = 0; key < shape.kv_lens[i]; key += kBlock) {
        owned_rows[block_tables[i * max_blocks_per_seq + key / kBlock]] =
            std::min(kBlock, shape.kv_lens[i] - key);
      }
    }
    const size_t row = shape.head_dim;
    for (int b = 0; b < num_blocks; ++b) {
      for (int h = 0; h < shape.num_kv_heads; ++h) {
        for (int r = owned_rows[b]; r < kBlock; ++r) {
          const size_t off = ((size_t(b) * shape.num_kv_heads + h) * kBlock + r) * row;
          std::fill(k_cache.begin() + off, k_cache.begin() + off + row, nan);
          std::fill(v_cache.begin() + off, v_cache.begin() + off + row, nan);
        }
      }
    }
  }

  // Points the table entries of blocks whose keys all lie before the window of the
  // sequence's first query at `nan_block`.
  void drop_blocks_before_window(int nan_block) {
    if (shape.sliding_window <= 0) return;
    for (size_t i = 0; i < shape.q_lens.size(); ++i) {
      const int window_start = shape.kv_lens[i] - shape.q_lens[i] - shape.sliding_window + 1;
      for (int b = 0; (b + 1) * kBlock <= window_start; ++b) {
        block_tables[i * max_blocks_per_seq + b] = nan_block;
      }
    }
  }

  AttentionParams params(void* out, float* lse) const {
    AttentionParams p;
    p.dtype = shape.dtype;
    p.q = d_q.get();
    p.k_cache = d_k.get();
    p.v_cache = d_v.get();
    p.out = out;
    p.lse = lse;
    p.cu_seqlens_q = d_cu.get<int32_t>();
    p.seqlens_k = d_seqlens.get<int32_t>();
    p.block_tables = d_tables.get<int32_t>();
    p.num_seqs = static_cast<int>(shape.q_lens.size());
    p.max_seqlen_q = max_q;
    p.max_seqlen_k = max_k;
    p.num_heads = shape.num_heads;
    p.num_kv_heads = shape.num_kv_heads;
    p.head_dim = shape.head_dim;
    p.block_size = kBlock;
    p.max_blocks_per_seq = max_blocks_per_seq;
    p.num_cache_blocks = num_blocks;
    p.softmax_scale = 1.f / std::sqrt(static_cast<float>(shape.head_dim));
    p.causal = shape.causal;
    p.sliding_window = shape.sliding_window;
    return p;
  }

  // The fp32 reference output [num_tokens, num_heads, head_dim] and LSE.
  void reference(std::vector<float>& out, std::vector<float>& lse) const {
    out.assign(size_t(num_tokens) * shape.num_heads * shape.head_dim, 0.f);
    lse.assign(size_t(num_tokens) * shape.num_heads, 0.f);
    AttentionCpuParams c;
    c.q = q.data();
    c.k_cache = k_cache.data();
    c.v_cache = v_cache.data();
    c.out = out.data();
    c.lse = lse.data();
    c.cu_seqlens_q = cu_seqlens_q.data();
    c.seqlens_k = seqlens_k.data();
    c.block_tables = block_tables.data();
    c.num_seqs = static_cast<int>(shape.q_lens.size());
    c.num_heads = shape.num_heads;
    c.num_kv_heads = shape.num_kv_heads;
    c.head_dim = shape.head_dim;
    c.block_size = kBlock;
    c.max_blocks_per_seq = max_blocks_per_seq;
    c.softmax_scale = 1.f / std::sqrt(static_cast<float>(shape.head_dim));
    c.causal = shape.causal;
    c.sliding_window = shape.sliding_window;
    attention_tiled_cpu(c);
  }

  size_t out_elems() const { return size_t(num_tokens) * shape.num_heads * shape.head_dim; }
  std::vector<float> download_out(const DeviceBuffer& d) const {
    const auto bits = d.to_host<uint16_t>();
    std::vector<float> out(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) out[i] = from_half_bits(shape.dtype, bits[i]);
    return out;
  }

  static constexpr int kBlock = 64;  // kernels/paged_kv.h kKvBlockSize
};

struct ErrorStats {
  double max_abs = 0.0;
  double rel_l2 = 0.0;
  size_t non_finite = 0;  // NaN/inf where the reference is finite (poison left unwritten)
};
inline ErrorStats compare(const std::vector<float>& got, const std::vector<float>& ref) {
  ErrorStats e;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    if (std::isinf(ref[i]) && got[i] == ref[i]) continue;  // lse = -inf rows
    if (!std::isfinite(got[i])) {
      ++e.non_finite;
      continue;
    }
    const double d = std::fabs(double(got[i]) - ref[i]);
    e.max_abs = std::max(e.max_abs, d);
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  if (got.size() != ref.size()) e.non_finite += 1;
  e.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

}  // namespace flashserve::kernels::testing
