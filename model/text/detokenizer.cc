#include "model/text/detokenizer.h"

#include <span>

#include "model/text/utf8.h"

namespace flashserve::model {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special,
                                               bool start_of_text)
    : tokenizer_(tokenizer), skip_special_(skip_special), start_of_text_(start_of_text) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  if (id < 0 || id >= tokenizer_.vocab_size()) return "";
  if (skip_special_ && tokenizer_.is_control(id)) return "";
  // decode() of a single token applies the first-token rule (SPM leading space) exactly as
  // decode() of the whole sequence would.
  pending_ += start_of_text_ && !started_
                  ? tokenizer_.decode(std::span<const int32_t>(&id, 1), skip_special_)
                  : tokenizer_.token_bytes(id);
  started_ = true;

  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const size_t len = valid_utf8_sequence_length(pending_, pos);
    if (len > 0) {
      out.append(pending_, pos, len);
      pos += len;
    } else if (is_incomplete_utf8_sequence(pending_, pos)) {
      break;  // wait for the next token
    } else {
      out += kReplacementCharacter;
      ++pos;
    }
  }
  pending_.erase(0, pos);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace flashserve::model
