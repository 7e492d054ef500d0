#include "tools/cli/request_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace flashserve::cli {

void add_generation_flags(FlagSpec* spec) {
  for (const char* name : {"max-tokens", "temperature", "top-k", "top-p", "min-p",
                           "repetition-penalty", "presence-penalty", "frequency-penalty",
                           "seed", "stop", "stop-token-id", "logprobs", "timeout"}) {
    spec->with_value.insert(name);
  }
  spec->booleans.insert("ignore-eos");
}

absl::Status apply_generation_flags(const Args& args, v1::GenerateRequest* request) {
  v1::SamplingParams* sampling = request->mutable_sampling();
  v1::StoppingCriteria* stopping = request->mutable_stopping();
  // Optional float fields: only set when given, so the server default applies otherwise.
  struct FloatFlag {
    const char* name;
    void (v1::SamplingParams::*set)(float);
  };
  for (const FloatFlag& f : {FloatFlag{"temperature", &v1::SamplingParams::set_temperature},
                             FloatFlag{"top-p", &v1::SamplingParams::set_top_p},
                             FloatFlag{"min-p", &v1::SamplingParams::set_min_p},
                             FloatFlag{"repetition-penalty",
                                       &v1::SamplingParams::set_repetition_penalty},
                             FloatFlag{"presence-penalty",
                                       &v1::SamplingParams::set_presence_penalty},
                             FloatFlag{"frequency-penalty",
                                       &v1::SamplingParams::set_frequency_penalty}}) {
    ASSIGN_OR_RETURN(const std::optional<double> value, args.get_optional_double(f.name));
    if (value) (sampling->*f.set)(static_cast<float>(*value));
  }
  ASSIGN_OR_RETURN(const std::optional<int> top_k, args.get_optional_int("top-k"));
  if (top_k) sampling->set_top_k(*top_k);
  if (args.has("seed")) {
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(args.get("seed"), &seed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--seed: '", args.get("seed"), "' is not an unsigned integer"));
    }
    sampling->set_seed(seed);
  }
  ASSIGN_OR_RETURN(const std::optional<int> max_tokens, args.get_optional_int("max-tokens"));
  if (max_tokens) stopping->set_max_new_tokens(*max_tokens);
  for (const std::string& stop : args.get_all("stop")) stopping->add_stop(stop);
  for (const std::string& text : args.get_all("stop-token-id")) {
    int id = 0;
    if (!absl::SimpleAtoi(text, &id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--stop-token-id: '", text, "' is not an integer"));
    }
    stopping->add_stop_token_ids(id);
  }
  stopping->set_ignore_eos(args.has("ignore-eos"));
  ASSIGN_OR_RETURN(const std::optional<int> logprobs, args.get_optional_int("logprobs"));
  if (logprobs) {
    request->set_logprobs(true);
    request->set_top_logprobs(*logprobs);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::chrono::milliseconds>> timeout_flag(const Args& args) {
  ASSIGN_OR_RETURN(const std::optional<double> seconds, args.get_optional_double("timeout"));
  if (!seconds || *seconds <= 0) return std::optional<std::chrono::milliseconds>();
  return std::optional<std::chrono::milliseconds>(
      std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000)));
}

}  // namespace flashserve::cli
