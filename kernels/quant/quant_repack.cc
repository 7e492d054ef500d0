// quant_repack() and weight_format_name() of kernels/quant/quant_layout.h.
//
// Element by element on purpose: each element's unsigned quant is read out of ggml's block
// by its index (the block formulas of quant_layout.h) and written where the device layout
// wants it. The fp32 reference (kernels/cpu/quant.cc) walks ggml's blocks the other way,
// loop by loop as ggml's dequantize_row_* do, so the two check each other.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/parallel_ranges.h"
#include "kernels/quant/quant_layout.h"

namespace flashserve::kernels {
namespace {

// Unsigned quant (Q8_0: the int8's bits) of element e of the ggml block at b.
uint8_t element_quant(WeightFormat f, const uint8_t* b, int e) {
  const int s = e / 32, l = e % 32;
  switch (f) {
    case WeightFormat::kQ8_0: return b[2 + e];
    case WeightFormat::kQ4_0: return (b[2 + e % 16] >> (4 * (e / 16))) & 15;
    case WeightFormat::kQ4_1: return (b[4 + e % 16] >> (4 * (e / 16))) & 15;
    case WeightFormat::kQ4_K: return (b[16 + 32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
    case WeightFormat::kQ5_K: {  // d, dmin | scales[12] | qh[32] at 16 | qs[128] at 48
      const int low = (b[48 + 32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
      return static_cast<uint8_t>(low | (((b[16 + l] >> s) & 1) << 4));
    }
    case WeightFormat::kQ6_K: {  // ql[128] | qh[64] at 128 | scales[16] at 192 | d at 208
      const int n = e / 128, t = (e % 128) / 32;
      const int low = (b[64 * n + 32 * (t % 2) + l] >> (4 * (t / 2))) & 15;
      return static_cast<uint8_t>(low | (((b[128 + 32 * n + l] >> (2 * t)) & 3) << 4));
    }
    case WeightFormat::kBf16: break;
  }
  return 0;
}

void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// Writes unit u of one row: q holds its 32 element quants, block the ggml block it lies in.
void repack_unit(WeightFormat f, const QuantLayout& l, int64_t row, int64_t u, const uint8_t* q,
                 const uint8_t* block, uint8_t* dst) {
  uint8_t* qs = dst + l.qs_offset + row * l.qs_row_bytes;
  if (f == WeightFormat::kQ8_0) {
    std::memcpy(qs + 16 * u, q, 16);
    std::memcpy(qs + l.qs_row_bytes / 2 + 16 * u, q + 16, 16);
  } else {
    for (int i = 0; i < 16; ++i) qs[16 * u + i] = static_cast<uint8_t>((q[i] & 15) | ((q[16 + i] & 15) << 4));
  }
  uint8_t* qh = dst + l.qh_offset + row * l.qh_row_bytes;
  if (f == WeightFormat::kQ5_K) {
    uint32_t word = 0;
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 4; ++j) word |= uint32_t{(q[4 * i + j] >> 4) & 1u} << (8 * j + i);
    }
    store_u32(qh + 4 * u, word);
  } else if (f == WeightFormat::kQ6_K) {
    for (int h = 0; h < 2; ++h) {
      uint32_t word = 0;
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
          word |= uint32_t{(q[16 * h + 4 * i + j] >> 4) & 3u} << (8 * j + 2 * i);
        }
      }
      store_u32(qh + 8 * u + 4 * h, word);
    }
  }
  uint8_t* scale = dst + l.scale_offset + row * l.scale_row_bytes;
  const int sub = static_cast<int>(u % 8);  // sub-block within a K-quant block
  switch (f) {
    case WeightFormat::kQ8_0:
    case WeightFormat::kQ4_0: std::memcpy(scale + 2 * u, block, 2); break;
    case WeightFormat::kQ4_1: std::memcpy(scale + 4 * u, block, 4); break;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K:
      if (sub == 0) std::memcpy(scale + 16 * (u / 8), block, 16);
      break;
    case WeightFormat::kQ6_K:
      std::memcpy(scale + 2 * u, block + 192 + 2 * sub, 2);
      if (sub == 0) std::memcpy(dst + l.d_offset + row * l.d_row_bytes + 2 * (u / 8), block + 208, 2);
      break;
    case WeightFormat::kBf16: break;
  }
}

}  // namespace

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBf16: return "bf16";
    case WeightFormat::kQ8_0: return "Q8_0";
    case WeightFormat::kQ4_0: return "Q4_0";
    case WeightFormat::kQ4_1: return "Q4_1";
    case WeightFormat::kQ4_K: return "Q4_K";
    case WeightFormat::kQ5_K: return "Q5_K";
    case WeightFormat::kQ6_K: return "Q6_K";
  }
  return "unknown";
}

absl::Status quant_repack(WeightFormat f, const uint8_t* src, int64_t src_bytes,
                          int64_t num_rows, int64_t k, uint8_t* dst, int64_t dst_bytes) {
  if (f == WeightFormat::kBf16) {
    return absl::UnimplementedError("quant_repack: bf16 weights are not repacked");
  }
  if (!quant_layout_ok(f, k) || num_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_repack: a ", num_rows, " x ", k, " ", weight_format_name(f),
        " tensor is not rows of whole ", weight_block_elements(f), "-element blocks"));
  }
  const int64_t row_bytes = ggml_row_bytes(f, k);
  const QuantLayout l = quant_layout(f, num_rows, k);
  if (src_bytes != num_rows * row_bytes || dst_bytes != l.total_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_repack: ", weight_format_name(f), " ", num_rows, " x ", k, " takes ",
        num_rows * row_bytes, " bytes in ggml's blocks and ", l.total_bytes,
        " repacked; got ", src_bytes, " and ", dst_bytes));
  }
  // Rows write disjoint bytes of dst, so they are spread over the cores (an 8B model's
  // matrices took ~14 s of one core); the zeroing of the padding finishes first.
  parallel_ranges(dst_bytes, int64_t{16} << 20, [&](int64_t begin, int64_t end) {
    std::memset(dst + begin, 0, static_cast<size_t>(end - begin));
  });
  const int64_t block_elements = weight_block_elements(f), block_bytes = weight_block_bytes(f);
  parallel_ranges(num_rows, int64_t{(1 << 20)} / k + 1, [&](int64_t row_begin, int64_t row_end) {
    uint8_t q[kQuantUnit];
    for (int64_t row = row_begin; row < row_end; ++row) {
      for (int64_t u = 0; u < k / kQuantUnit; ++u) {
        const int64_t first = u * kQuantUnit;
        const uint8_t* block = src + row * row_bytes + first / block_elements * block_bytes;
        const int e0 = static_cast<int>(first % block_elements);
        for (int i = 0; i < kQuantUnit; ++i) q[i] = element_quant(f, block, e0 + i);
        repack_unit(f, l, row, u, q, block, dst);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace flashserve::kernels
