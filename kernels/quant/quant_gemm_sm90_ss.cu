// quant_gemm() with QuantGemmKernel::kWgmmaSs (kernels/quant/quant_gemm.h), Hopper: the
// weights decoded once a CTA into a bf16 tile in shared memory by warps that do nothing
// else, and wgmma with both operands in shared memory, as a bf16 GEMM runs. (The register-A
// kernels of kernels/quant/quant_gemm_sm90.cu make every consumer warp decode its own
// fragments, ~4.5 instructions an element on the path to its wgmma; at 128-token tiles and
// one CTA an SM that does not hide under the tensor pipe: bench/gemm/NOTES.md, v5 and v6.)
//
// A CTA of 512 threads computes 128 weight rows by 128 tokens (wgmma N) over a range of k
// (all of it, or one of `splits` parts) in stages of kBK = 64, one CTA an SM:
//   * warpgroup 0, the producer (one thread a weight row): v6's ws_produce unchanged, the
//     stage's raw weight rows (quants, decoded scales) and x tile by cp.async into a ring of
//     kStages raw slots; full(i) when stage i has landed (kRows arrivals).
//   * warpgroup 1, the decoder (one thread a weight row): waits on full(i) and for a free
//     A slot, turns its row's 64 quants into 64 bf16 (decode_pair: the same instructions and
//     so the same bits as v5 / v6, kernels/cpu/quant.h dequantize_gemm_cpu), writes them as
//     8 chunks of 16 bytes into the A tile [128 rows][64] bf16 in the 128-byte swizzle that a
//     K-major wgmma descriptor reads (the x tile's layout), fences them to the async proxy
//     and arrives on a_full(i); it also arrives on empty(i) (it is done with the raw rows).
//   * warpgroups 2 and 3, the consumers: consumer c owns rows 64 c .. 64 c + 63 (an m64 half
//     of the A tile; 64 fp32 accumulators a thread, as v6 at 128 tokens). Stage i: wait on
//     full(i) (the x tile) and a_full(i), four wgmma m64n128k16 SS (k16 steps at 32 bytes
//     into both tiles' 128-byte rows), one commit, wait_group 1: stage i - 1's group has
//     retired, so its raw slot (empty, 3 x kRows arrivals with the decoder's) and its A slot
//     (a_empty, 2 x kRows) are released.
// No CTA-wide barrier after the barriers' init. Deadlock-free: the producer's lag is v6's
// (kWsLag <= kStages - 2); the decoder needs only full(i) and the consumers' release of
// stage i - kASlots, which they give once they have a_full(i - kASlots + 1), which the
// decoder arrived at before; the consumers need only what the other two roles give in order.
//
// Instruction budget (Q4_K; bench/gemm/NOTES.md "quant_gemm v7" has the SASS counts): the
// tensor pipe needs 128 x 128 x 64 MAC / 2,048 a clock = 512 clocks a stage; a decoder
// thread spends ~2 instructions an element (a nibble mask a word, a byte permute, a
// subtraction and an FMA a pair, one st.shared.v4 a chunk of 8), ~150 instructions a warp
// and stage on 4 warps, one a scheduler.
//
// Split-k, its reduction and the output rule as v5 / v6 (wgmma_splits, reduce_splits,
// store_output).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/device.h"
#include "kernels/quant/quant_gemm_sm90.cuh"

namespace flashserve::kernels {
namespace device::quant_gemm {
namespace {

constexpr int kSsBM = 128;                     // tokens a CTA, the wgmma N
constexpr int kSsThreads = 4 * kRows;          // producer, decoder, two consumers
constexpr int kATileBytes = kRows * kBK * 2;   // [128 rows][64] bf16 = 16 KB, 1024-aligned
// A slots: the decoder runs up to kASlots - 1 stages ahead of the stage the consumers issue
// (two would leave it no slack: the slot it fills is released only as the consumers issue
// the stage before).
constexpr int kASlots = 3;
constexpr int kSsMaxStages = 10;

// Raw slots: as many as fit one CTA an SM beside the A slots and the barriers (Q4_x 8,
// Q5_K / Q6_K / Q8_0 6).
template <WeightFormat F>
__host__ __device__ constexpr int ss_stages() {
  const int fit = (kSmemPerSm - kReservedPerCta - kAlign - kASlots * kATileBytes -
                   16 * (kSsMaxStages + kASlots)) /
                  wg_stage_bytes<F, kSsBM>();
  return fit < kSsMaxStages ? fit : kSsMaxStages;
}
// The A slots, the raw ring, the barriers (full / empty a raw slot, a_full / a_empty an A
// slot), the alignment slack.
template <WeightFormat F>
__host__ __device__ constexpr int ss_smem_bytes() {
  return kASlots * kATileBytes + ss_stages<F>() * wg_stage_bytes<F, kSsBM>() +
         16 * (ss_stages<F>() + kASlots) + kAlign;
}

#if defined(FLASHSERVE_SM90A)
// The rings' geometry and barriers. The raw ring has what ws_produce needs (kStages, kWAt,
// slot, full, empty).
template <WeightFormat F>
struct SsRing {
  static constexpr int kStages = ss_stages<F>();
  static constexpr int kStageBytes = wg_stage_bytes<F, kSsBM>();
  static constexpr int kWAt = x_tile_bytes<kSsBM>();  // the weight rows' offset in a slot
  uint8_t* a_base;  // kASlots A tiles, then the raw slots
  uint8_t* base;
  uint32_t bars;    // full, empty (kStages each), a_full, a_empty (kASlots each)
  __device__ __forceinline__ uint8_t* slot(int s) const { return base + s * kStageBytes; }
  __device__ __forceinline__ uint32_t full(int s) const { return bars + 8 * s; }
  __device__ __forceinline__ uint32_t empty(int s) const { return bars + 8 * (kStages + s); }
  __device__ __forceinline__ uint8_t* a_slot(int s) const { return a_base + s * kATileBytes; }
  __device__ __forceinline__ uint32_t a_full(int s) const { return bars + 8 * (2 * kStages + s); }
  __device__ __forceinline__ uint32_t a_empty(int s) const {
    return bars + 8 * (2 * kStages + kASlots + s);
  }
};

// One row's unit j of a raw slot, whole: its 16 quant bytes (Q8_0: 32, the two halves), its
// high-bit words (Q5_K 1, Q6_K 2) and its two scale words (store_scales).
template <WeightFormat F>
struct RowUnitAll {
  uint4 qs[F == WeightFormat::kQ8_0 ? 2 : 1];
  uint32_t qh[F == WeightFormat::kQ6_K ? 2 : 1];
  uint2 s;
};
template <WeightFormat F>
__device__ __forceinline__ RowUnitAll<F> load_row_unit_all(const uint8_t* row, int j) {
  RowUnitAll<F> r;
#pragma unroll
  for (int h = 0; h < (F == WeightFormat::kQ8_0 ? 2 : 1); ++h) {
    r.qs[h] = *reinterpret_cast<const uint4*>(row + 16 * j + 16 * kUnitsPerStage * h);
  }
  if constexpr (F == WeightFormat::kQ5_K) {
    r.qh[0] = *reinterpret_cast<const uint32_t*>(row + qs_bytes<F>() + 4 * j);
  } else if constexpr (F == WeightFormat::kQ6_K) {
    const uint2 v = *reinterpret_cast<const uint2*>(row + qs_bytes<F>() + 8 * j);
    r.qh[0] = v.x, r.qh[1] = v.y;
  } else {
    r.qh[0] = 0;
  }
  r.s = *reinterpret_cast<const uint2*>(row + scale_at<F>() + 8 * j);
  return r;
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The quants of elements e0 .. e0 + 3 of the unit (e0 = 4 w, w = 0..7) as four bytes, as
// lane_quants builds them: the low nibbles (byte b of qs holds element b low, 16 + b high),
// the high bits at bit 4 (Q5_K: element e's is bit e / 4 of byte e % 4 of the word) or bits
// 4-5 (Q6_K: element 16 h + l's are bits 2 (l / 4) of byte l % 4 of word h); Q8_0 the int8
// of half w / 4.
template <WeightFormat F>
__device__ __forceinline__ uint32_t unit_quants4(const RowUnitAll<F>& r, int w) {
  if constexpr (F == WeightFormat::kQ8_0) return word_of(r.qs[w / 4], w % 4);
  uint32_t v = (word_of(r.qs[0], w % 4) >> (4 * (w / 4))) & 0x0f0f0f0fu;
  if constexpr (F == WeightFormat::kQ5_K) v |= ((r.qh[0] >> w) & 0x01010101u) << 4;
  if constexpr (F == WeightFormat::kQ6_K) v |= ((r.qh[w / 4] >> (2 * (w % 4))) & 0x03030303u) << 4;
  return v;
}

// The decoder warpgroup: row threadIdx.x % kRows of every stage's A tile.
template <WeightFormat F>
__device__ __forceinline__ void ss_decode(const SsRing<F>& r, int num_stages) {
  const int row = threadIdx.x % kRows;
  const uint32_t k43 = bf16_magic();
  // Chunk q of the row lies at 16 (q ^ row % 8) in its 128 bytes: the row's base with the
  // XOR folded in, then one XOR a chunk.
  const uint32_t a_row = smem_addr(r.a_slot(0)) + row * (kBK * 2) + 16 * (row % 8);
  RingPos<SsRing<F>::kStages> at;
  RingPos<kASlots> a_at;
#pragma unroll 1
  for (int i = 0; i < num_stages; ++i) {
    mbar_wait(r.full(at.slot), at.parity);
    // Round k of an A slot waits for the consumers' release of round k - 1.
    if (i >= kASlots) mbar_wait(r.a_empty(a_at.slot), a_at.parity ^ 1);
    const uint8_t* raw = r.slot(at.slot) + SsRing<F>::kWAt + row * row_stride<F>();
    const uint32_t dst = a_row + a_at.slot * kATileBytes;
#pragma unroll
    for (int j = 0; j < kUnitsPerStage; ++j) {
      const RowUnitAll<F> u = load_row_unit_all<F>(raw, j);
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // elements 8 q .. 8 q + 7 of unit j: chunk 4 j + q
        const uint32_t lo = unit_quants4<F>(u, 2 * q), hi = unit_quants4<F>(u, 2 * q + 1);
        const int h = q / 2;  // the unit's 16-element half (Q6_K: which scale)
        const uint32_t w0 = decode_pair<F>(lo, 0, u.s, h, k43);
        const uint32_t w1 = decode_pair<F>(lo, 2, u.s, h, k43);
        const uint32_t w2 = decode_pair<F>(hi, 0, u.s, h, k43);
        const uint32_t w3 = decode_pair<F>(hi, 2, u.s, h, k43);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(
                         dst ^ (16 * (4 * j + q))),
                     "r"(w0), "r"(w1), "r"(w2), "r"(w3)
                     : "memory");
      }
    }
    // wgmma reads the tile through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    mbar_arrive(r.a_full(a_at.slot));
    mbar_arrive(r.empty(at.slot));
    at.next();
    a_at.next();
  }
}

// sw128_desc(p, 16, 1024) of the K-major tiles here, from the shared address alone: its
// high word is a constant and its low word (address / 16 | LBO field) moves with the address,
// so that a stage's eight descriptors cost 32-bit adds (shared addresses stay below 2^18, the
// descriptor's 14-bit start field, so the add never carries into the LBO field).
__device__ __forceinline__ uint32_t sw128_desc_lo(uint32_t smem) { return smem >> 4 | 1u << 16; }
__device__ __forceinline__ uint64_t sw128_desc_k_major(uint32_t lo) {
  return uint64_t{(1024u >> 4) | 1u << 30} << 32 | lo;
}

// A consumer warpgroup: rows 64 c .. 64 c + 63 of the tile over the split's stages, into acc.
template <WeightFormat F>
__device__ __forceinline__ void ss_consume(const SsRing<F>& r, int c, int num_stages,
                                           float (&acc)[kSsBM / 2]) {
  RingPos<SsRing<F>::kStages> at, prev;  // of stages i and i - 1 (once i >= 1)
  RingPos<kASlots> a_at, a_prev;
  // Slot 0's descriptors; slot s is s x (slot bytes / 16) further. The m64 half of the A
  // tile starts 64 rows x 128 bytes in: 1024-aligned.
  const uint32_t x_lo0 = sw128_desc_lo(smem_addr(r.slot(0)));
  const uint32_t a_lo0 = sw128_desc_lo(smem_addr(r.a_slot(0)) + 64 * c * (kBK * 2));
#pragma unroll 1
  for (int i = 0; i < num_stages; ++i) {
    mbar_wait(r.full(at.slot), at.parity);  // the x tile (the decoder waited too)
    mbar_wait(r.a_full(a_at.slot), a_at.parity);
    const uint32_t x_lo = x_lo0 + at.slot * (SsRing<F>::kStageBytes >> 4);
    const uint32_t a_lo = a_lo0 + a_at.slot * (kATileBytes >> 4);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {  // k16 steps: 32 bytes into the 128-byte rows
      wgmma_ss<__nv_bfloat16, kSsBM>(acc, sw128_desc_k_major(a_lo + 2 * kk),
                                     sw128_desc_k_major(x_lo + 2 * kk), 1);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    // Every wgmma of stage i - 1 has retired: its raw and A slots may be refilled.
    if (i > 0) {
      mbar_arrive(r.empty(prev.slot));
      mbar_arrive(r.a_empty(a_prev.slot));
      prev.next();
      a_prev.next();
    }
    at.next();
    a_at.next();
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  fence_operands(acc);
}
#endif  // FLASHSERVE_SM90A

template <WeightFormat F>
__global__ void __launch_bounds__(kSsThreads, 1)
    quant_gemm_wgmma_ss_kernel(const QuantGemmParams p, const int splits) {
#if defined(FLASHSERVE_SM90A)
  using Ring = SsRing<F>;
  extern __shared__ uint4 smem_raw[];
  Ring r;
  r.a_base = reinterpret_cast<uint8_t*>(smem_raw) +
             ((kAlign - (smem_addr(smem_raw) & (kAlign - 1))) & (kAlign - 1));
  r.base = r.a_base + kASlots * kATileBytes;
  r.bars = smem_addr(r.base + Ring::kStages * Ring::kStageBytes);
  if (threadIdx.x == 0) {
    for (int s = 0; s < Ring::kStages; ++s) {
      mbar_init(r.full(s), kRows);
      mbar_init(r.empty(s), 3 * kRows);  // the decoder and both consumers
    }
    for (int s = 0; s < kASlots; ++s) {
      mbar_init(r.a_full(s), kRows);
      mbar_init(r.a_empty(s), 2 * kRows);
    }
  }
  __syncthreads();  // the barriers' init; the only CTA-wide barrier

  const int tok0 = blockIdx.x * kSsBM, row0 = blockIdx.y * kRows, split = blockIdx.z;
  const int total_stages = (p.k / kQuantUnit + kUnitsPerStage - 1) / kUnitsPerStage;
  const int per_split = (total_stages + splits - 1) / splits;
  const int s_begin = split * per_split, s_end = min(total_stages, s_begin + per_split);
  const int num_stages = max(s_end - s_begin, 0);
  wait_for_prior_grid();  // every thread: x is the previous kernel's, y may be read (+=)
  const int role = threadIdx.x / kRows;
  if (role == 0) {
    ws_produce<F, kSsBM>(p, r, row0, tok0, s_begin, num_stages);
    allow_next_grid();
    return;
  }
  if (role == 1) {
    ss_decode<F>(r, num_stages);
    allow_next_grid();
    return;
  }
  const int c = role - 2, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int my_row = 64 * c + 16 * warp + g;  // and + 8
  constexpr int kAcc = kSsBM / 2;
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
  ss_consume<F>(r, c, num_stages, acc);
  allow_next_grid();

  // Accumulator i: n8 tile i / 4, element i % 4 of the mma.sync C layout (as v5 / v6).
  float* partial = splits > 1 ? p.partials + int64_t{split} * p.m * p.n : nullptr;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    const int f = row0 + my_row + 8 * ((i % 4) / 2);
    const int tok = tok0 + 8 * (i / 4) + 2 * t + i % 2;
    if (f >= p.n || tok >= p.m) continue;
    if (partial != nullptr) {
      partial[int64_t{tok} * p.n + f] = acc[i];
    } else {
      store_output(p, f, tok, acc[i]);
    }
  }
#endif
}

template <WeightFormat F>
struct SsSmemTag {};

template <WeightFormat F>
absl::Status launch_wgmma_ss(const QuantGemmParams& p, int num_sms, cudaStream_t stream) {
  auto* kernel = quant_gemm_wgmma_ss_kernel<F>;
  constexpr int smem = ss_smem_bytes<F>();
  static_assert(smem + kReservedPerCta <= kSmemPerSm);
  static_assert(kWsLag <= ss_stages<F>() - 2, "the producer's ring deadlocks");
  if (absl::Status s = set_smem_limit_once<SsSmemTag<F>>(kernel, smem); !s.ok()) return s;
  const int splits = wgmma_splits(p, kRows, kSsBM, 1, num_sms);
  const dim3 grid(static_cast<unsigned>((p.m + kSsBM - 1) / kSsBM),
                  static_cast<unsigned>((p.n + kRows - 1) / kRows), splits);
  CUDA_CHECK(launch_dependent(kernel, grid, kSsThreads, smem, stream, p, splits));
  return reduce_splits(p, splits, stream);
}

}  // namespace

absl::Status quant_gemm_wgmma_ss(const QuantGemmParams& p, int num_sms, cudaStream_t stream) {
  return quant::dispatch_quant_format(p.format, [&](auto tag) -> absl::Status {
    return launch_wgmma_ss<decltype(tag)::value>(p, num_sms, stream);
  });
}

}  // namespace device::quant_gemm
}  // namespace flashserve::kernels
