#include "model/batch_validation.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace flashserve::model {
namespace {

absl::Status invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("forward batch: ", what));
}

absl::Status check_sizes(const ForwardBatch& b) {
  const size_t num_tokens = b.token_ids.size();
  if (b.num_seqs() < 1) return invalid("has no sequences (seqlens_k is empty)");
  if (b.positions.size() != num_tokens || b.slot_mapping.size() != num_tokens) {
    return invalid(absl::StrCat("positions (", b.positions.size(), ") and slot_mapping (",
                                b.slot_mapping.size(), ") must have num_tokens (", num_tokens,
                                ") entries"));
  }
  if (b.cu_seqlens_q.size() != static_cast<size_t>(b.num_seqs()) + 1) {
    return invalid(absl::StrCat("cu_seqlens_q has ", b.cu_seqlens_q.size(),
                                " entries, expected num_seqs + 1 = ", b.num_seqs() + 1));
  }
  if (b.max_blocks_per_seq < 1 ||
      b.block_tables.size() != static_cast<size_t>(b.num_seqs()) * b.max_blocks_per_seq) {
    return invalid(absl::StrCat("block_tables has ", b.block_tables.size(),
                                " entries, expected num_seqs * max_blocks_per_seq = ",
                                b.num_seqs(), " * ", b.max_blocks_per_seq));
  }
  if (b.cu_seqlens_q.front() != 0 || b.cu_seqlens_q.back() != b.num_tokens()) {
    return invalid(absl::StrCat("cu_seqlens_q must run from 0 to num_tokens ", num_tokens,
                                ", got ", b.cu_seqlens_q.front(), " .. ",
                                b.cu_seqlens_q.back()));
  }
  for (int s = 0; s < b.num_seqs(); ++s) {
    if (b.cu_seqlens_q[s + 1] <= b.cu_seqlens_q[s]) {
      return invalid(absl::StrCat("cu_seqlens_q must grow by >= 1 per sequence, entry ", s + 1,
                                  " is ", b.cu_seqlens_q[s + 1], " after ", b.cu_seqlens_q[s]));
    }
  }
  return absl::OkStatus();
}

// Checks sequence s's lengths, block table, positions and slots.
absl::Status check_sequence(const ForwardBatch& b, int s, int num_blocks, int block_size) {
  const int q_begin = b.cu_seqlens_q[s];
  const int q_len = b.cu_seqlens_q[s + 1] - q_begin;
  const int k_len = b.seqlens_k[s];
  if (q_len < 1 || q_len > k_len) {
    return invalid(absl::StrCat("sequence ", s, " has ", q_len, " query tokens and seqlens_k ",
                                k_len, " (need 1 <= q_len <= seqlens_k)"));
  }
  const int64_t num_used = (static_cast<int64_t>(k_len) + block_size - 1) / block_size;
  if (num_used > b.max_blocks_per_seq) {
    return invalid(absl::StrCat("sequence ", s, " needs ", num_used, " blocks for seqlens_k ",
                                k_len, ", max_blocks_per_seq is ", b.max_blocks_per_seq));
  }
  const int32_t* table = b.block_tables.data() + static_cast<int64_t>(s) * b.max_blocks_per_seq;
  for (int64_t j = 0; j < num_used; ++j) {
    if (table[j] < 0 || table[j] >= num_blocks) {
      return invalid(absl::StrCat("block_tables[", s, "][", j, "] = ", table[j],
                                  " outside [0, ", num_blocks, ")"));
    }
  }
  for (int i = 0; i < q_len; ++i) {
    const int t = q_begin + i;
    const int pos = k_len - q_len + i;
    if (b.positions[t] != pos) {
      return invalid(absl::StrCat("positions[", t, "] = ", b.positions[t], ", sequence ", s,
                                  " puts that token at position ", pos));
    }
    const int64_t slot = static_cast<int64_t>(table[pos / block_size]) * block_size +
                         pos % block_size;
    if (b.slot_mapping[t] != slot) {
      return invalid(absl::StrCat("slot_mapping[", t, "] = ", b.slot_mapping[t],
                                  ", the block table puts position ", pos, " at slot ", slot));
    }
  }
  return absl::OkStatus();
}

// sample_seqs ascending in [0, num_seqs), one spec each, penalty ranges inside the arrays.
absl::Status check_sampling(const ForwardBatch& b) {
  if (b.sample_specs.size() != b.sample_seqs.size()) {
    return invalid(absl::StrCat("sample_specs has ", b.sample_specs.size(),
                                " entries, sample_seqs ", b.sample_seqs.size()));
  }
  if (b.penalty_counts.size() != b.penalty_tokens.size()) {
    return invalid(absl::StrCat("penalty_counts has ", b.penalty_counts.size(),
                                " entries, penalty_tokens ", b.penalty_tokens.size()));
  }
  for (size_t i = 0; i < b.sample_seqs.size(); ++i) {
    const int32_t s = b.sample_seqs[i];
    const int32_t floor = i == 0 ? 0 : b.sample_seqs[i - 1] + 1;
    if (s < floor || s >= b.num_seqs()) {
      return invalid(absl::StrCat("sample_seqs[", i, "] = ", s, " is not ascending in [0, ",
                                  b.num_seqs(), ")"));
    }
    const kernels::SampleSpec& spec = b.sample_specs[i];
    if (spec.penalty_begin < 0 || spec.penalty_end < spec.penalty_begin ||
        spec.penalty_end > static_cast<int64_t>(b.penalty_tokens.size())) {
      return invalid(absl::StrCat("sample_specs[", i, "] penalty range [", spec.penalty_begin,
                                  ", ", spec.penalty_end, ") outside the ",
                                  b.penalty_tokens.size(), " penalty entries"));
    }
    if (spec.num_top_logprobs < 0 || spec.num_top_logprobs > kernels::kMaxTopLogprobs ||
        !(spec.uniform >= 0 && spec.uniform < 1) || !(spec.temperature >= 0)) {
      return invalid(absl::StrCat("sample_specs[", i, "]: num_top_logprobs ",
                                  spec.num_top_logprobs, ", uniform ", spec.uniform,
                                  ", temperature ", spec.temperature, " out of range"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status validate_forward_batch(const ForwardBatch& b, const ModelConfig& config,
                                    int num_blocks, int block_size, int num_previous_samples) {
  RETURN_IF_ERROR(check_sizes(b));
  if (!b.previous_samples.empty() &&
      static_cast<int>(b.previous_samples.size()) != b.num_tokens()) {
    return invalid(absl::StrCat("previous_samples has ", b.previous_samples.size(),
                                " entries for ", b.num_tokens(), " tokens"));
  }
  for (size_t t = 0; t < b.previous_samples.size(); ++t) {
    const int32_t i = b.previous_samples[t];
    if (i < -1 || i >= num_previous_samples) {
      return invalid(absl::StrCat("previous_samples[", t, "] = ", i, " is neither -1 nor one of ",
                                  num_previous_samples, " samples of the previous step",
                                  num_previous_samples == 0 ? " (none in flight)" : ""));
    }
  }
  for (int t = 0; t < b.num_tokens(); ++t) {
    if (b.token_ids[t] < 0 || b.token_ids[t] >= config.vocab_size) {
      return invalid(absl::StrCat("token_ids[", t, "] = ", b.token_ids[t], " outside [0, ",
                                  config.vocab_size, ")"));
    }
  }
  for (int s = 0; s < b.num_seqs(); ++s) {
    RETURN_IF_ERROR(check_sequence(b, s, num_blocks, block_size));
  }
  return check_sampling(b);
}

}  // namespace flashserve::model
