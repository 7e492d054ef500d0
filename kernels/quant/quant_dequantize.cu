// dequantize_bf16() of kernels/quant/quant_gemv.h: a bandwidth-bound copy, ~0.56 (Q4) + 2
// bytes of HBM traffic per element, so the kernel is built around the memory system.
//   - Each warp owns kBatches batches of 32 consecutive units (a unit: 32 elements of a row,
//     kernels/quant/quant_layout.h); lane i loads unit i of every batch with the GEMV's
//     loads (kernels/quant/quant_gemv.cuh): 16-byte quant words, coalesced across the warp
//     (512 B per instruction), plus the scales. All batches' loads are issued before any
//     decode, ~64 bytes per lane in flight (the GEMV's budget: ~36 KB per SM keeps 4.8 TB/s
//     over ~1 us of latency).
//   - Then per batch: lane i decodes its unit (kernels/quant/quant_unit.h) and writes its 64
//     bytes of bf16 (128 of fp32) into a per-warp staging tile in shared memory; after
//     __syncwarp the warp copies the tile out with 16-byte stores in which lane j writes
//     chunk j of each 512-byte line, so every store instruction writes 512 contiguous bytes
//     (four full 128-byte lines). The one-unit-per-thread layout (lane i storing its own 64
//     bytes) needs 4 instructions each touching 32 lines with 16 bytes per 32-byte sector:
//     twice the L1->L2 transactions and partial-sector writes (bench/gemm/NOTES.md).
//   - The staging tile is XOR-swizzled per 16-byte chunk, so that both the per-unit writes
//     (lane = unit) and the line-wise reads (lane = chunk) are free of bank conflicts: a
//     quarter warp's eight 16-byte accesses land in eight distinct 16-byte bank groups.
// Units are numbered over the flat output [rows, k / 32]: a batch may straddle rows (each
// lane finds its own row), the output of a batch is always contiguous.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda_plumbing.cuh"
#include "kernels/quant/quant_gemv.cuh"
#include "kernels/quant/quant_gemv.h"

namespace flashserve::kernels {
namespace device::quant_gemv {
namespace {

constexpr int kDequantWarps = 8;
constexpr int kDequantThreads = 32 * kDequantWarps;

// Batches of 32 units per warp, all loaded before the first decode: ~64 bytes of quants
// per lane (Q8_0: 2 x 32 bytes; Q6_K 4 x 24 bytes) within ~64 registers of raw words.
template <WeightFormat F>
constexpr int dequant_batches() {
  return F == WeightFormat::kQ8_0 ? 2 : 4;
}
// Below this many units a matrix is dequantized one batch a warp: with all the batches a
// SmolLM2-135M matrix (10-55 k units) is 10-54 blocks, a tenth to a half of the H200's SMs,
// and each warp's batches run one after another; one batch a warp gives 4x the blocks and
// every warp one load-decode-store. From here (~2 blocks an SM on 132 SMs with all the
// batches) the large batches keep each lane's ~64 bytes in flight.
constexpr int64_t kOneBatchBelowUnits = int64_t{1} << 18;

// 16-byte chunks of one unit's output: 32 bf16 or 32 fp32.
template <bool kFp32>
constexpr int unit_chunks() {
  return kFp32 ? 8 : 4;
}

// Position in the staging tile of chunk c of unit i (see the top of the file): the chunk
// index XORed with the unit's position among the eight units whose chunks a 128-byte row of
// banks holds, so that eight consecutive lanes hit eight different bank groups whether they
// write chunk c of eight units or read eight consecutive chunks.
template <int kChunks>
__device__ __forceinline__ int stage_slot(int i, int c) {
  return kChunks * i + (c ^ ((i * kChunks / 8) % kChunks));
}

// The decoded unit's chunks into the staging tile: chunk c holds elements
// [c * 32 / kChunks, (c + 1) * 32 / kChunks).
template <WeightFormat F, bool kFp32>
__device__ __forceinline__ void stage_unit(const Unit& w, int i, uint4* tile) {
  constexpr int kChunks = unit_chunks<kFp32>();
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    uint4 v;
    if constexpr (kFp32) {
      const int e = 4 * c;
      v = make_uint4(__float_as_uint(quant::unit_element<F>(w, e)),
                     __float_as_uint(quant::unit_element<F>(w, e + 1)),
                     __float_as_uint(quant::unit_element<F>(w, e + 2)),
                     __float_as_uint(quant::unit_element<F>(w, e + 3)));
    } else {
      uint32_t word[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int e = 8 * c + 2 * j;
        const __nv_bfloat162 b = __floats2bfloat162_rn(quant::unit_element<F>(w, e),
                                                       quant::unit_element<F>(w, e + 1));
        word[j] = *reinterpret_cast<const uint32_t*>(&b);
      }
      v = make_uint4(word[0], word[1], word[2], word[3]);
    }
    tile[stage_slot<kChunks>(i, c)] = v;
  }
}

// Block `block` of the launch over p's units (each warp its kBatches batches), staging
// through `tile` (the warp's 32 x kChunks chunks of shared memory).
template <WeightFormat F, bool kFp32, int kBatches>
__device__ __forceinline__ void dequantize_blocks(const DequantizeParams& p, int block,
                                                  uint4* tile) {
  constexpr int kChunks = unit_chunks<kFp32>();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int units = static_cast<int>(p.k / kQuantUnit);
  const int items = static_cast<int>(p.row_end - p.row_begin) * units;  // <= 2^30: launcher
  const int first = (block * kDequantWarps + warp) * 32 * kBatches;
  const QuantLayout l = quant_layout(F, p.num_rows, p.k);
  const uint8_t* base = static_cast<const uint8_t*>(p.w);

  // A gather's ids may come from the previous kernel: read them after it. The weights are
  // written by no kernel of a step: loaded before the wait, as the GEMV does.
  if (p.row_ids != nullptr) wait_for_prior_grid();
  UnitRaw raw[kBatches];
  int unit[kBatches];  // the lane's unit's index in its row, per batch
#pragma unroll
  for (int b = 0; b < kBatches; ++b) {
    const int item = first + 32 * b + lane;
    const int r = item / units;
    unit[b] = item - r * units;
    if (item < items) {
      const int64_t row = p.row_ids != nullptr ? p.row_ids[r] : p.row_begin + r;
      load_unit<F>(row_ptrs<F>(base, l, static_cast<int>(row)), l, unit[b], raw[b]);
    }
  }
  wait_for_prior_grid();
  allow_next_grid();

  uint4* out = static_cast<uint4*>(p.out);
#pragma unroll
  for (int b = 0; b < kBatches; ++b) {
    const int batch = first + 32 * b;  // warp-uniform
    if (batch >= items) break;
    const int item = batch + lane;
    if (item < items) {
      stage_unit<F, kFp32>(quant::decode_unit<F>(raw[b], unit[b]), lane, tile);
    }
    __syncwarp();
    uint4* dst = out + static_cast<int64_t>(batch) * kChunks;
#pragma unroll
    for (int s = 0; s < kChunks; ++s) {
      const int chunk = 32 * s + lane, i = chunk / kChunks;
      if (batch + i < items) dst[chunk] = tile[stage_slot<kChunks>(i, chunk % kChunks)];
    }
    __syncwarp();  // the tile is rewritten by the next batch
  }
}

template <WeightFormat F, bool kFp32, int kBatches>
__global__ void __launch_bounds__(kDequantThreads) dequantize_kernel(const DequantizeParams p) {
  __shared__ uint4 stage[kDequantWarps][32 * unit_chunks<kFp32>()];
  dequantize_blocks<F, kFp32, kBatches>(p, blockIdx.x, stage[threadIdx.x / 32]);
}

// dequantize_bf16_batch's launch: blocks [first_block[j], first_block[j + 1]) are job j's,
// one batch a warp, in the job's format (a switch on a block-uniform value).
struct DequantBatch {
  DequantizeParams job[kMaxDequantJobs];
  int first_block[kMaxDequantJobs + 1];
  int count;
};

__global__ void __launch_bounds__(kDequantThreads) dequantize_batch_kernel(const DequantBatch b) {
  __shared__ uint4 stage[kDequantWarps][32 * unit_chunks<false>()];
  int j = 0;
  while (j + 1 < b.count && static_cast<int>(blockIdx.x) >= b.first_block[j + 1]) ++j;
  const DequantizeParams& p = b.job[j];
  const int block = blockIdx.x - b.first_block[j];
  uint4* tile = stage[threadIdx.x / 32];
  switch (p.format) {
    case WeightFormat::kQ8_0: return dequantize_blocks<WeightFormat::kQ8_0, false, 1>(p, block, tile);
    case WeightFormat::kQ4_0: return dequantize_blocks<WeightFormat::kQ4_0, false, 1>(p, block, tile);
    case WeightFormat::kQ4_1: return dequantize_blocks<WeightFormat::kQ4_1, false, 1>(p, block, tile);
    case WeightFormat::kQ4_K: return dequantize_blocks<WeightFormat::kQ4_K, false, 1>(p, block, tile);
    case WeightFormat::kQ5_K: return dequantize_blocks<WeightFormat::kQ5_K, false, 1>(p, block, tile);
    default: return dequantize_blocks<WeightFormat::kQ6_K, false, 1>(p, block, tile);
  }
}

template <WeightFormat F, bool kFp32, int kBatches>
absl::Status launch_dequantize_batches(const DequantizeParams& p, int64_t items,
                                       cudaStream_t stream) {
  const int64_t per_block = int64_t{kDequantThreads} * kBatches;
  const int64_t blocks = (items + per_block - 1) / per_block;
  CUDA_CHECK(launch_dependent(dequantize_kernel<F, kFp32, kBatches>,
                              static_cast<unsigned>(blocks), kDequantThreads, 0, stream, p));
  return absl::OkStatus();
}

template <WeightFormat F, bool kFp32>
absl::Status launch_dequantize(const DequantizeParams& p, int64_t items, cudaStream_t stream) {
  if (items < kOneBatchBelowUnits) return launch_dequantize_batches<F, kFp32, 1>(p, items, stream);
  return launch_dequantize_batches<F, kFp32, dequant_batches<F>()>(p, items, stream);
}

}  // namespace
}  // namespace device::quant_gemv

namespace {

// Units of the output, numbered in int by the kernel (with a block's worth of headroom).
constexpr int64_t kMaxUnits = int64_t{1} << 30;

absl::Status check_dequantize(const DequantizeParams& p) {
  if (p.format == WeightFormat::kBf16 || !quant_layout_ok(p.format, p.k) || p.num_rows < 1 ||
      p.row_begin < 0 || p.row_end <= p.row_begin ||
      (p.row_ids == nullptr && p.row_end > p.num_rows) || (p.row_ids != nullptr && p.row_begin != 0) ||
      p.num_rows > INT32_MAX || (p.row_end - p.row_begin) * (p.k / kQuantUnit) > kMaxUnits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dequantize_bf16: unsupported ", weight_format_name(p.format), " tensor ", p.num_rows,
        " x ", p.k, " rows [", p.row_begin, ", ", p.row_end, ")"));
  }
  if (p.w == nullptr || p.out == nullptr || reinterpret_cast<uintptr_t>(p.w) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.out) % 16 != 0) {
    return absl::InvalidArgumentError("dequantize_bf16: a pointer is null or not 16-byte aligned");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status dequantize_bf16(const DequantizeParams& p, cudaStream_t stream) {
  if (absl::Status s = check_dequantize(p); !s.ok()) return s;
  const int64_t items = (p.row_end - p.row_begin) * (p.k / kQuantUnit);
  return quant::dispatch_quant_format(p.format, [&](auto tag) -> absl::Status {
    constexpr WeightFormat kF = decltype(tag)::value;
    return p.out_fp32 ? device::quant_gemv::launch_dequantize<kF, true>(p, items, stream)
                      : device::quant_gemv::launch_dequantize<kF, false>(p, items, stream);
  });
}

absl::Status dequantize_bf16_batch(const DequantizeParams* jobs, int count,
                                   cudaStream_t stream) {
  if (count < 1 || count > kMaxDequantJobs) {
    return absl::InvalidArgumentError(absl::StrCat("dequantize_bf16_batch: ", count,
                                                   " jobs (1 to ", kMaxDequantJobs, ")"));
  }
  device::quant_gemv::DequantBatch b{};
  b.count = count;
  int64_t blocks = 0;
  for (int j = 0; j < count; ++j) {
    const DequantizeParams& p = jobs[j];
    if (absl::Status s = check_dequantize(p); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("dequantize_bf16_batch: job ", j, ": ", s.message()));
    }
    if (p.row_ids != nullptr || p.out_fp32) {
      return absl::InvalidArgumentError(
          absl::StrCat("dequantize_bf16_batch: job ", j, " is a gather or fp32 (bf16 ranges only)"));
    }
    b.job[j] = p;
    b.first_block[j] = static_cast<int>(blocks);
    const int64_t items = (p.row_end - p.row_begin) * (p.k / kQuantUnit);
    blocks += (items + device::quant_gemv::kDequantThreads - 1) / device::quant_gemv::kDequantThreads;
    if (blocks > INT32_MAX) return absl::InvalidArgumentError("dequantize_bf16_batch: too many units");
  }
  b.first_block[count] = static_cast<int>(blocks);
  CUDA_CHECK(device::launch_dependent(device::quant_gemv::dequantize_batch_kernel,
                              static_cast<unsigned>(blocks), device::quant_gemv::kDequantThreads,
                              0, stream, b));
  return absl::OkStatus();
}

}  // namespace flashserve::kernels
