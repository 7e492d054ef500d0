#include "server/engine/output_processor.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace flashserve::engine {

size_t longest_partial_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = 0;
  const std::string_view t(text);
  for (const std::string& stop : stops) {
    for (size_t len = std::min(stop.size() - 1, t.size()); len > best; --len) {
      if (t.substr(t.size() - len) == std::string_view(stop).substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

OutputProcessor::OutputProcessor(const model::Tokenizer& tokenizer, StopConditions stop)
    : tokenizer_(tokenizer),
      stop_(std::move(stop)),
      detokenizer_(tokenizer, /*skip_special=*/true) {}

bool OutputProcessor::is_stop_token(int32_t token) const {
  if (!stop_.ignore_eos && tokenizer_.is_end_of_generation(token)) return true;
  return std::find(stop_.stop_token_ids.begin(), stop_.stop_token_ids.end(), token) !=
         stop_.stop_token_ids.end();
}

bool OutputProcessor::release(bool at_end, std::string* out) {
  // A match can only start in pending_: everything released before could not begin one.
  size_t match = std::string::npos;
  for (const std::string& stop : stop_.stop_strings) {
    match = std::min(match, pending_.find(stop));
  }
  if (match != std::string::npos) {
    out->append(pending_, 0, match);
    pending_.clear();
    return true;
  }
  const size_t keep = at_end ? 0 : longest_partial_stop(pending_, stop_.stop_strings);
  out->append(pending_, 0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return false;
}

OutputProcessor::Output OutputProcessor::append(int32_t token) {
  Output output;
  ++num_generated_;
  if (is_stop_token(token)) {
    pending_ += detokenizer_.flush();
    output.stop = release(/*at_end=*/true, &output.text) ? StopReason::kStopSequence
                                                         : StopReason::kStopToken;
    return output;
  }
  pending_ += detokenizer_.push(token);
  const bool at_length = num_generated_ >= stop_.max_new_tokens;
  if (at_length) pending_ += detokenizer_.flush();
  if (release(at_length, &output.text)) {
    output.stop = StopReason::kStopSequence;
  } else if (at_length) {
    output.stop = StopReason::kLength;
  }
  return output;
}

std::string OutputProcessor::flush() {
  pending_ += detokenizer_.flush();
  std::string text;
  release(/*at_end=*/true, &text);
  return text;
}

}  // namespace flashserve::engine
