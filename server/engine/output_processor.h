#pragma once
// Turns one request's sampled tokens into the text its client sees, and decides when it stops.
//
// Per token: stop token? (the request's stop_token_ids, or an end-of-generation token unless
// ignore_eos) -> finished, the token's text is not emitted. Otherwise the token is detokenized
// incrementally (never broken UTF-8) and appended to a pending buffer, which is searched for
// the stop strings: a match ends the request, the text before it is released, the match and
// everything after it are dropped. Without a match, the longest tail of the buffer that could
// still grow into a stop string is held back and the rest released — so a stop string never
// reaches the client, even partly, and is never split across two events. At max_new_tokens
// the request ends and everything held is released.
//
// Thread-safety: none; one per request, used by the engine thread. The tokenizer must outlive
// it.
#include <cstdint>
#include <string>
#include <vector>

#include "model/text/detokenizer.h"
#include "model/text/tokenizer.h"

namespace flashserve::engine {

struct StopConditions {
  int max_new_tokens = 16;                // >= 1
  std::vector<std::string> stop_strings = {};  // non-empty, valid UTF-8
  std::vector<int32_t> stop_token_ids = {};
  bool ignore_eos = false;
};

enum class StopReason {
  kNone,          // keep generating
  kStopToken,     // end-of-generation or stop token id
  kStopSequence,  // a stop string matched
  kLength,        // max_new_tokens reached
};

class OutputProcessor {
 public:
  OutputProcessor(const model::Tokenizer& tokenizer, StopConditions stop);

  struct Output {
    std::string text;  // newly released text (may be empty)
    StopReason stop = StopReason::kNone;
  };
  // Feeds the next sampled token. REQUIRES: no earlier call returned a stop.
  Output append(int32_t token);

  // Ends the request early (cancel, deadline, error): whatever text is held back. Held text
  // is released, since no stop string completed.
  std::string flush();

  int num_generated() const { return num_generated_; }

 private:
  bool is_stop_token(int32_t token) const;
  // Moves the releasable prefix of pending_ into `out`; returns true on a stop-string match.
  bool release(bool at_end, std::string* out);

  const model::Tokenizer& tokenizer_;
  StopConditions stop_;
  model::IncrementalDetokenizer detokenizer_;
  std::string pending_;  // detokenized, not yet released (a possible stop-string prefix)
  int num_generated_ = 0;
};

// Length of the longest suffix of `text` that is a proper prefix of one of `stops`.
size_t longest_partial_stop(const std::string& text, const std::vector<std::string>& stops);

}  // namespace flashserve::engine
