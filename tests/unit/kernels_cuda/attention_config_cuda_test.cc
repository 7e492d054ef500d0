// The attention API's configuration checks and the host-side choices (kAuto's kernel, the
// prefill and decode split heuristics, the workspace bound) on hand-made parameters: most
// need no GPU (rejected or decided before any launch); the cache-block-count test launches
// on a Hopper GPU. Split from attention_cuda_test.cc (the kernels against the reference);
// the same test binary, so the suites' names and filters are unchanged.
#include <gtest/gtest.h>

#include <string>

#include "kernels/attention/attention.h"
#include "kernels/device.h"
#include "tests/unit/kernels_cuda/attention_problem.h"

namespace flashserve::kernels {
namespace {

using testing::device_is_hopper;
using testing::DeviceBuffer;
using testing::Problem;
using testing::ProblemShape;

// ---- configuration errors (no GPU needed: rejected before any launch) ----------------------

AttentionParams valid_looking_params() {
  alignas(16) static int dummy[4];
  AttentionParams p;
  p.q = p.k_cache = p.v_cache = dummy;
  p.out = dummy;
  p.cu_seqlens_q = p.seqlens_k = p.block_tables = dummy;
  p.num_seqs = 1;
  p.max_seqlen_q = p.max_seqlen_k = 1;
  p.num_heads = 4;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.block_size = 64;
  p.max_blocks_per_seq = 1;
  p.softmax_scale = 0.125f;
  return p;
}

TEST(AttentionConfigTest, RejectsUnsupportedHeadDimByName) {
  AttentionParams p = valid_looking_params();
  p.head_dim = 80;
  for (const absl::Status& s : {attention_prefill(p, nullptr), attention_naive(p, nullptr, 0, nullptr),
                                attention_decode(p, 1, nullptr, 0, nullptr)}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("unsupported head_dim 80"), std::string::npos) << s;
  }
}

TEST(AttentionConfigTest, RejectsBadGqaBlockSizeAndSplits) {
  AttentionParams p = valid_looking_params();
  p.num_kv_heads = 3;
  EXPECT_EQ(attention_prefill(p, nullptr).code(), absl::StatusCode::kInvalidArgument);
  p = valid_looking_params();
  p.block_size = 16;
  EXPECT_EQ(attention_prefill(p, nullptr).code(), absl::StatusCode::kInvalidArgument);
  p = valid_looking_params();
  EXPECT_EQ(attention_decode(p, 0, nullptr, 0, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(attention_decode(p, 4, nullptr, 0, nullptr).code(),  // needs a workspace
            absl::StatusCode::kInvalidArgument);
  p.num_heads = 34;  // group of 17 > 16
  EXPECT_EQ(attention_decode(p, 1, nullptr, 0, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(AttentionConfigTest, RejectsPrefillSplitsOutOfRangeOrWithoutWorkspaceByName) {
  AttentionParams p = valid_looking_params();
  for (int splits : {0, kMaxPrefillSplits + 1}) {
    const absl::Status s = attention_prefill(p, splits, nullptr, 0, nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("num_splits " + std::to_string(splits)), std::string::npos) << s;
  }
  const absl::Status s = attention_prefill(p, 2, nullptr, 0, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("workspace of 0 bytes, need"), std::string::npos) << s;
}

// Every kernel loads q and K/V in 16-byte pieces and stores the output in 4-byte pairs: a
// caller's misaligned pointer is an error naming the pointers, not a fault on the GPU.
TEST(AttentionConfigTest, RejectsMisalignedPointersByName) {
  alignas(16) static char bytes[64];
  for (int which = 0; which < 4; ++which) {
    AttentionParams p = valid_looking_params();
    const void* const shifted = bytes + (which == 3 ? 2 : 8);
    if (which == 0) p.q = shifted;
    if (which == 1) p.k_cache = shifted;
    if (which == 2) p.v_cache = shifted;
    if (which == 3) p.out = const_cast<void*>(shifted);
    for (const absl::Status& s : {attention_prefill(p, nullptr),
                                  attention_naive(p, nullptr, 0, nullptr),
                                  attention_decode(p, 1, nullptr, 0, nullptr)}) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << which;
      EXPECT_NE(s.message().find("must be 16-byte aligned and out 4-byte aligned"),
                std::string::npos)
          << s;
    }
  }
  AttentionParams p = valid_looking_params();
  p.out = bytes + 4;  // 4-byte aligned output: accepted by the checks (no GPU call follows)
  p.num_heads = 34;   // ... and rejected later for a reason of its own
  const absl::Status s = attention_decode(p, 1, nullptr, 0, nullptr);
  EXPECT_EQ(s.message().find("aligned"), std::string::npos) << s;
}

// A prefill shape for the split heuristic: one call of `seqs` sequences of q queries over k
// keys at `heads` heads, causal.
AttentionParams prefill_shape(int seqs, int q, int k, int heads, int head_dim) {
  AttentionParams p;
  p.num_seqs = seqs;
  p.max_seqlen_q = q;
  p.max_seqlen_k = k;
  p.num_heads = heads;
  p.num_kv_heads = heads / 3;
  p.head_dim = head_dim;
  p.causal = true;
  return p;
}

// kAuto's choice table (kernels/attention/README.md), host code only: which kernel runs.
TEST(AttentionConfigTest, AutoPicksTheKernelOfTheChoiceTable) {
  auto pick = [](int q, int k, int head_dim, bool causal, bool hopper, int splits) {
    AttentionParams p = prefill_shape(1, q, k, 9, head_dim);
    p.causal = causal;
    return attention_prefill_kernel_for(p, hopper, splits);
  };
  // Not Hopper: the portable kernel, whatever the shape.
  EXPECT_EQ(pick(512, 512, 128, false, false, 1), PrefillImpl::kPortable);
  // d128: the Hopper kernel at every length; persistent up to 4,096 keys when unsplit (causal).
  EXPECT_EQ(pick(1, 1, 128, true, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(512, 512, 128, false, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(512, 512, 128, false, true, 2), PrefillImpl::kHopper);
  EXPECT_EQ(pick(1024, 1025, 128, true, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(4096, 4096, 128, true, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(4096, 4097, 128, true, true, 1), PrefillImpl::kHopper);
  // d128 full: to 8,192 keys given the stream-K workspace (the stream-K walk), else 4,096.
  EXPECT_EQ(pick(4096, 4097, 128, false, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(8192, 8192, 128, false, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(8192, 8193, 128, false, true, 1), PrefillImpl::kHopper);
  {
    AttentionParams full = prefill_shape(1, 4096, 4096, 9, 128);
    full.causal = false;
    EXPECT_EQ(attention_prefill_kernel_for(full, true, 1, 132, false),
              PrefillImpl::kHopperPersistent);
    full.max_seqlen_k = 4097;
    EXPECT_EQ(attention_prefill_kernel_for(full, true, 1, 132, false), PrefillImpl::kHopper);
    EXPECT_EQ(attention_prefill_kernel_for(full, true, 1, 132, true),
              PrefillImpl::kHopperPersistent);
  }
  EXPECT_EQ(pick(64, 8704, 128, true, true, 1), PrefillImpl::kHopper);
  {  // A window does not enter the class.
    AttentionParams w = prefill_shape(1, 4096, 4096, 9, 128);
    w.sliding_window = 512;
    EXPECT_EQ(attention_prefill_kernel_for(w, true, 1), PrefillImpl::kHopperPersistent);
    w.max_seqlen_k = 4097;
    EXPECT_EQ(attention_prefill_kernel_for(w, true, 1), PrefillImpl::kHopper);
    w.head_dim = 64;  // (d64 causal reaches 16,384 keys without a window)
    EXPECT_EQ(attention_prefill_kernel_for(w, true, 1), PrefillImpl::kHopper);
  }
  // Past 1,024 keys, given the SMs: only a grid of more tiles than SMs (a 512-token chunk at
  // 32 heads: 96 row blocks of 192 at d64, 128 of 128 at d128, under 132 SMs: one-tile).
  {
    AttentionParams chunk = prefill_shape(1, 512, 2560, 32, 64);
    EXPECT_EQ(attention_prefill_kernel_for(chunk, true, 1, 132), PrefillImpl::kHopper);
    EXPECT_EQ(attention_prefill_kernel_for(chunk, true, 1, 0), PrefillImpl::kHopperPersistent);
    chunk.head_dim = 128;
    EXPECT_EQ(attention_prefill_kernel_for(chunk, true, 1, 132), PrefillImpl::kHopper);
    EXPECT_EQ(attention_prefill_kernel_for(chunk, true, 1, 127), PrefillImpl::kHopperPersistent);
    chunk.num_seqs = 8;  // 1,024 tiles
    EXPECT_EQ(attention_prefill_kernel_for(chunk, true, 1, 132), PrefillImpl::kHopperPersistent);
    chunk = prefill_shape(1, 512, 1024, 32, 128);  // <= 1,024 keys: as before v32
    EXPECT_EQ(attention_prefill_kernel_for(chunk, true, 1, 132), PrefillImpl::kHopperPersistent);
  }
  // d64: mma.sync under 512 queries (and, causal, under 1,536 keys); the Hopper kernel from
  // there, persistent up to 4,096 keys, 16,384 causal (no stream-K walk at d64).
  EXPECT_EQ(pick(511, 511, 64, false, true, 1), PrefillImpl::kPortable);
  EXPECT_EQ(pick(512, 512, 64, false, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(512, 512, 64, true, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(1024, 1024, 64, true, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(1024, 1024, 64, true, true, 3), PrefillImpl::kHopper);
  EXPECT_EQ(pick(4096, 4096, 64, false, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(4096, 4097, 64, false, true, 1), PrefillImpl::kHopper);
  EXPECT_EQ(pick(8192, 8192, 64, false, true, 1), PrefillImpl::kHopper);
  EXPECT_EQ(pick(64, 1535, 64, true, true, 1), PrefillImpl::kPortable);
  EXPECT_EQ(pick(64, 1536, 64, true, true, 1), PrefillImpl::kHopperPersistent);
  // d64 causal: to 16,384 keys.
  EXPECT_EQ(pick(64, 4097, 64, true, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(16384, 16384, 64, true, true, 1), PrefillImpl::kHopperPersistent);
  EXPECT_EQ(pick(16384, 16385, 64, true, true, 1), PrefillImpl::kHopper);
  // A pinned kernel is itself on Hopper; kPortable everywhere.
  AttentionParams pinned = prefill_shape(1, 4096, 4096, 9, 64);
  for (PrefillImpl impl :
       {PrefillImpl::kPortable, PrefillImpl::kHopper, PrefillImpl::kHopperPersistent}) {
    pinned.prefill_impl = impl;
    EXPECT_EQ(attention_prefill_kernel_for(pinned, true, 1), impl);
  }
  pinned.prefill_impl = PrefillImpl::kHopperPersistent;
  EXPECT_EQ(attention_prefill_num_splits(pinned, 132), 1);
}

TEST(AttentionConfigTest, PrefillSplitsFillOneWaveOfSmsWhereTheHopperKernelRuns) {
  // SmolLM2's 9 heads, a 512-token chunk: 3 row blocks of 192 x 9 = 27 CTAs on 132 SMs.
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(1, 512, 8704, 9, 64), 132), 4);
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(1, 512, 1536, 9, 64), 132), 3);  // 12 tiles
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(1, 512, 512, 9, 64), 132), 1);   // 4 tiles
  // Where kAuto would run the persistent form, which cannot split, a grid under
  // one wave keeps the one-tile grid's split (27 CTAs, 8 tiles: 2), and then runs one-tile.
  AttentionParams short_grid = prefill_shape(1, 512, 1024, 9, 64);
  EXPECT_EQ(attention_prefill_num_splits(short_grid, 132), 2);
  EXPECT_EQ(attention_prefill_kernel_for(short_grid, true, 2), PrefillImpl::kHopper);
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(8, 512, 1024, 9, 64), 132), 1);  // 216 CTAs
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(1, 512, 8704, 36, 64), 132), 1);  // 108 CTAs
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(8, 512, 8704, 9, 64), 132), 1);   // 216 CTAs
  // A short chunk onto a long context (d64 causal: the Hopper kernel from 1,536 keys).
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(1, 64, 65536, 9, 64), 132), 14);
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(1, 64, 1 << 20, 3, 64), 132),
            kMaxPrefillSplits);
  // Where kAuto runs the portable kernel, or it is pinned: never split.
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(1, 64, 1024, 9, 64), 132), 1);
  AttentionParams portable = prefill_shape(1, 512, 8704, 9, 64);
  portable.prefill_impl = PrefillImpl::kPortable;
  EXPECT_EQ(attention_prefill_num_splits(portable, 132), 1);
  // d128: 128-row blocks; Llama 3.2 3B's 24 heads, a 512 chunk: 96 CTAs.
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(1, 512, 8704, 24, 128), 132), 1);
  EXPECT_EQ(attention_prefill_num_splits(prefill_shape(1, 512, 8704, 6, 128), 132), 5);
  // A window caps the tiles a row block walks: W 512 + 192 rows + a tile = 7 tiles -> 1.
  AttentionParams windowed = prefill_shape(1, 512, 8704, 9, 64);
  windowed.sliding_window = 512;
  EXPECT_EQ(attention_prefill_num_splits(windowed, 132), 1);
}

TEST(AttentionConfigTest, PrefillWorkspaceStaysWithinItsBound) {
  for (int head_dim : {64, 128}) {
    for (int sms : {1, 78, 132}) {
      const size_t bound = attention_prefill_workspace_bound(head_dim, sms);
      for (int seqs : {1, 2, 3, 5, 8}) {
        for (int q : {1, 63, 64, 100, 191, 192, 193, 512, 700, 2048}) {
          for (int heads : {3, 6, 9, 24, 48}) {
            for (bool causal : {true, false}) {  // non-causal: the stream-K slots (v31)
              AttentionParams p = prefill_shape(seqs, q, 1 << 16, heads, head_dim);
              p.causal = causal;
              const int splits = attention_prefill_num_splits(p, sms);
              EXPECT_LE(attention_prefill_workspace_bytes(p, splits), bound)
                  << "d" << head_dim << " sms " << sms << " seqs " << seqs << " q " << q
                  << " heads " << heads << " splits " << splits << " causal " << causal;
            }
          }
        }
      }
    }
  }
}

TEST(AttentionConfigTest, RejectsRoundQ8OutWhereItDoesNotApplyByName) {
  AttentionParams p = valid_looking_params();
  p.round_q8_out = true;
  EXPECT_EQ(attention_naive(p, nullptr, 0, nullptr).code(), absl::StatusCode::kInvalidArgument);
  p.dtype = DType::kFp16;
  const absl::Status prefill = attention_prefill(p, nullptr);
  EXPECT_EQ(prefill.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(prefill.message().find("round_q8_out needs a bf16 output"), std::string::npos)
      << prefill;
  const absl::Status decode = attention_decode(p, 1, nullptr, 0, nullptr);
  EXPECT_EQ(decode.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(decode.message().find("round_q8_out needs a bf16 output"), std::string::npos) << decode;
}

TEST(AttentionConfigTest, RejectsAWindowWithoutCausalByName) {
  AttentionParams p = valid_looking_params();
  p.causal = false;
  p.sliding_window = 512;
  for (const absl::Status& s :
       {attention_prefill(p, nullptr), attention_naive(p, nullptr, 0, nullptr)}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("sliding_window 512 needs causal"), std::string::npos) << s;
  }
}

// The Hopper kernel loads whole K/V tiles by TMA through maps whose bounds are the cache's
// block count: a caller that leaves it unset gets an error naming it, not a map over nothing.
TEST(AttentionConfigTest, HopperPathNeedsTheCacheBlockCountByName) {
  SKIP_WITHOUT_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "not a Hopper GPU";
  ProblemShape s;
  s.q_lens = s.kv_lens = {200};
  const Problem pr(s, 7);
  DeviceBuffer out(size_t(pr.num_tokens) * s.num_heads * s.head_dim * 2);
  AttentionParams p = pr.params(out.get(), nullptr);
  p.prefill_impl = PrefillImpl::kHopper;
  p.num_cache_blocks = 0;
  const absl::Status status = attention_prefill(p, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("num_cache_blocks"), std::string::npos) << status;
  p.num_cache_blocks = pr.num_blocks;
  EXPECT_TRUE(attention_prefill(p, nullptr).ok());
  FS_CUDA_OR_DIE(cudaDeviceSynchronize());
}

TEST(AttentionConfigTest, SplitHeuristicCountsOnlyTheWindowsTiles) {
  // 512 keys straddle at most 9 tiles (575 keys): capped at 2 splits of >= 4 tiles.
  EXPECT_EQ(attention_decode_num_splits(1, 8, 1 << 20, 132, 512), 2);
  EXPECT_EQ(attention_decode_num_splits(1, 8, 1 << 20, 132, 4096), 16);  // 65 tiles
  EXPECT_EQ(attention_decode_num_splits(1, 8, 4096, 132, 8192), 16);     // as without one
  EXPECT_EQ(attention_decode_num_splits(1, 8, 4096, 132, 0), 16);
}

TEST(AttentionConfigTest, SplitHeuristicFillsTheGpuAndRespectsBounds) {
  // The fewest splits that make 231 CTAs (1.75 an SM of 132).
  EXPECT_EQ(attention_decode_num_splits(16, 3, 4096, 132), 5);    // 48 CTAs -> 240
  EXPECT_EQ(attention_decode_num_splits(64, 3, 4096, 132), 2);    // 192 -> 384
  EXPECT_EQ(attention_decode_num_splits(16, 8, 4096, 132), 2);    // 128 -> 256
  EXPECT_EQ(attention_decode_num_splits(64, 8, 4096, 132), 1);    // 512 already
  EXPECT_EQ(attention_decode_num_splits(1, 8, 4096, 132), 16);    // capped at 4 tiles/split
  EXPECT_EQ(attention_decode_num_splits(1, 8, 1 << 20, 132), 29);  // 8 -> 232
  EXPECT_EQ(attention_decode_num_splits(1, 2, 1 << 20, 132), kMaxDecodeSplits);
  EXPECT_EQ(attention_decode_num_splits(256, 8, 4096, 132), 1);   // already 2048 CTAs
  EXPECT_EQ(attention_decode_num_splits(4, 2, 100, 132), 1);      // too short to split
}

}  // namespace
}  // namespace flashserve::kernels
