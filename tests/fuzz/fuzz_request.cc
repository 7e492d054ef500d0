// libFuzzer target: request validation on arbitrary bytes parsed as a GenerateRequest (what
// the server does with every call: parse, then validate_generate_request / validate_chat /
// validate_sampling...). Checks, besides no crash: every refusal is InvalidArgument with a
// message that starts with a field path; an accepted request has its documented invariants.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "flashserve/v1/generation.pb.h"
#include "server/api/validation.h"

namespace {

flashserve::api::RequestLimits limits() {
  flashserve::api::RequestLimits l;
  l.context_length = 8192;
  l.vocab_size = 49152;
  l.max_chat_messages = 64;
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  flashserve::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  static const flashserve::api::RequestLimits kLimits = limits();
  const absl::Status status = flashserve::api::validate_generate_request(request, kLimits);
  if (!status.ok()) {
    if (status.code() != absl::StatusCode::kInvalidArgument || status.message().empty() ||
        status.message().find(": ") == std::string::npos) {
      std::abort();
    }
    return 0;
  }
  const auto& s = request.sampling();
  if (s.has_temperature() && !(s.temperature() >= 0 && s.temperature() <= 100)) std::abort();
  if (s.has_top_p() && !(s.top_p() > 0 && s.top_p() <= 1)) std::abort();
  if (!std::isfinite(s.presence_penalty()) || !std::isfinite(s.frequency_penalty())) std::abort();
  if (request.has_token_ids()) {
    for (int32_t id : request.token_ids().ids()) {
      if (id < 0 || id >= kLimits.vocab_size) std::abort();
    }
  }
  return 0;
}
