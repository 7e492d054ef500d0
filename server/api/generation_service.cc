#include "server/api/generation_service.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "model/text/utf8.h"
#include "server/api/generation_calls.h"
#include "server/api/grpc_status.h"
#include "server/api/raw_messages.h"
#include "server/api/validation.h"
#include "server/metrics/metrics.h"

namespace flashserve::api {
namespace {

const grpc::Status& loading_status() {
  static const grpc::Status* status = new grpc::Status(
      grpc::StatusCode::UNAVAILABLE, "the model is still loading; retry shortly");
  return *status;
}

grpc::ServerUnaryReactor* finish_unary(grpc::CallbackServerContext* context,
                                       const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

std::optional<std::chrono::steady_clock::time_point> steady_deadline(
    std::chrono::system_clock::time_point deadline) {
  const auto system_now = std::chrono::system_clock::now();
  // gRPC reports "no deadline" as a time far in the future.
  if (deadline >= system_now + std::chrono::hours(24 * 365)) return std::nullopt;
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline - system_now);
}

void GenerationService::record_refused_call(const grpc::Status& status) {
  // An unauthenticated call is not counted as a request (no label fits it, and counting
  // them would let anyone move the server's request metrics); a malformed one is.
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) return;
  record_rejected(absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                               status.error_message()));
}

void GenerationService::record_rejected(const absl::Status& refusal) {
  if (metrics_ != nullptr) metrics_->record_request(metrics::rejected_status(refusal), metrics::Api::kGrpc);
}

absl::StatusOr<engine::GenerationRequest> GenerationService::prepare(
    const grpc::CallbackServerContext& context, const v1::GenerateRequest& request,
    const Backend& backend) {
  const engine::EngineSnapshot snapshot = backend.engine->snapshot();
  if (!snapshot.failure.ok()) {  // the model runner failed: UNAVAILABLE naming why
    record_rejected(snapshot.failure);
    return snapshot.failure;
  }
  if (snapshot.stalled) {
    absl::Status stalled = absl::UnavailableError(absl::StrCat(
        "the engine has made no progress for over ",
        absl::FormatDuration(absl::FromChrono(backend.engine_options.stall_threshold)),
        " (stalled); health is NOT_SERVING; retry later or on another replica"));
    record_rejected(stalled);
    return stalled;
  }
  if (absl::Status status = validate_generate_request(request, backend.prompt.limits);
      !status.ok()) {
    record_rejected(status);
    return status;
  }
  auto out =
      build_generation_request(request, backend.prompt, steady_deadline(context.deadline()));
  if (!out.ok()) record_rejected(out.status());
  return out;
}

grpc::Status GenerationService::accept(const grpc::CallbackServerContext& context,
                                       const grpc::ByteBuffer& bytes,
                                       google::protobuf::Message* request) const {
  if (grpc::Status denied = authorize(context); !denied.ok()) return denied;
  const absl::Status parsed = parse_request(bytes, request);
  if (!parsed.ok()) {
    log_rate_limited(absl::StrCat("malformed request from ", context.peer(), ": ",
                                  parsed.message()));
  }
  return to_grpc_status(parsed);
}

grpc::ServerUnaryReactor* GenerationService::Generate(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* bytes,
                                                      grpc::ByteBuffer* response) {
  v1::GenerateRequest request;
  // Refused calls go through a GenerateCall too: every generation call writes its access line.
  if (grpc::Status status = accept(*context, *bytes, &request); !status.ok()) {
    record_refused_call(status);
    auto* call = new GenerateCall(nullptr, response, logger_);
    call->reject(status);
    return call;
  }
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) {
    record_rejected(absl::UnavailableError("model is loading"));
    auto* call = new GenerateCall(nullptr, response, logger_);
    call->reject(loading_status());
    return call;
  }
  auto* call = new GenerateCall(backend->engine, response, logger_);
  auto prepared = prepare(*context, request, *backend);
  if (!prepared.ok()) {
    call->reject(to_grpc_status(prepared.status()));
  } else {
    call->submit(std::move(*prepared));
  }
  return call;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::GenerateStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes) {
  v1::GenerateRequest request;
  if (grpc::Status status = accept(*context, *bytes, &request); !status.ok()) {
    record_refused_call(status);
    auto* call = new GenerateStreamCall(nullptr, logger_);
    call->reject(status);
    return call;
  }
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) {
    record_rejected(absl::UnavailableError("model is loading"));
    auto* call = new GenerateStreamCall(nullptr, logger_);
    call->reject(loading_status());
    return call;
  }
  auto* call = new GenerateStreamCall(backend->engine, logger_);
  auto prepared = prepare(*context, request, *backend);
  if (!prepared.ok()) {
    call->reject(to_grpc_status(prepared.status()));
  } else {
    call->submit(std::move(*prepared));
  }
  return call;
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* bytes,
                                                      grpc::ByteBuffer* out) {
  v1::TokenizeRequest request;
  if (grpc::Status status = accept(*context, *bytes, &request); !status.ok()) {
    return finish_unary(context, status);
  }
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) return finish_unary(context, loading_status());
  v1::TokenizeResponse response;
  const grpc::Status status = tokenize(*backend, request, &response);
  if (status.ok()) *out = to_byte_buffer(response);
  return finish_unary(context, status);
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* bytes,
                                                        grpc::ByteBuffer* out) {
  v1::DetokenizeRequest request;
  if (grpc::Status status = accept(*context, *bytes, &request); !status.ok()) {
    return finish_unary(context, status);
  }
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) return finish_unary(context, loading_status());
  v1::DetokenizeResponse response;
  const grpc::Status status = detokenize(*backend, request, &response);
  if (status.ok()) *out = to_byte_buffer(response);
  return finish_unary(context, status);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* bytes,
                                                          grpc::ByteBuffer* out) {
  v1::GetModelInfoRequest request;
  if (grpc::Status status = accept(*context, *bytes, &request); !status.ok()) {
    return finish_unary(context, status);
  }
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) return finish_unary(context, loading_status());
  v1::ModelInfo info;
  get_model_info(*backend, &info);
  *out = to_byte_buffer(info);
  return finish_unary(context, grpc::Status::OK);
}

grpc::Status GenerationService::tokenize(const Backend& backend,
                                         const v1::TokenizeRequest& request,
                                         v1::TokenizeResponse* response) const {
  const PromptContext& ctx = backend.prompt;
  std::vector<int32_t> ids;
  switch (request.input_case()) {
    case v1::TokenizeRequest::kText:
      if (request.text().size() > static_cast<size_t>(ctx.limits.max_input_bytes)) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrFormat("text: is %d bytes, at most %d",
                                            request.text().size(), ctx.limits.max_input_bytes));
      }
      ids = ctx.tokenizer->encode(request.text(), request.add_special_tokens(),
                                  request.parse_special());
      break;
    case v1::TokenizeRequest::kChat: {
      if (auto st = validate_chat(request.chat(), ctx.limits); !st.ok()) {
        return to_grpc_status(st);
      }
      auto text = render_chat(request.chat(), ctx);
      if (!text.ok()) return to_grpc_status(text.status());
      ids = ctx.tokenizer->encode(*text, request.add_special_tokens(), /*parse_special=*/true);
      break;
    }
    case v1::TokenizeRequest::INPUT_NOT_SET:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "input: one of text or chat is required");
  }
  for (int32_t id : ids) {
    response->add_token_ids(id);
    response->add_pieces(model::escape_invalid_utf8(ctx.tokenizer->token_bytes(id)));
  }
  return grpc::Status::OK;
}

grpc::Status GenerationService::detokenize(const Backend& backend,
                                           const v1::DetokenizeRequest& request,
                                           v1::DetokenizeResponse* response) const {
  const model::Tokenizer& tokenizer = *backend.prompt.tokenizer;
  if (auto st = validate_token_ids(request.token_ids(), tokenizer.vocab_size(), "token_ids");
      !st.ok()) {
    return to_grpc_status(st);
  }
  const std::vector<int32_t> ids(request.token_ids().begin(), request.token_ids().end());
  response->set_text(model::sanitize_utf8(tokenizer.decode(ids, request.skip_special_tokens())));
  return grpc::Status::OK;
}

void GenerationService::get_model_info(const Backend& backend, v1::ModelInfo* info) const {
  const engine::Engine& engine = *backend.engine;
  const model::ModelConfig& config = engine.model_config();
  const RequestLimits& limits = backend.prompt.limits;
  const engine::EngineSnapshot snapshot = engine.snapshot();
  info->set_architecture(model::sanitize_utf8(config.architecture));
  info->set_name(model::sanitize_utf8(config.name));
  info->set_context_length(limits.context_length);
  info->set_vocab_size(config.vocab_size);
  info->set_num_layers(config.num_layers);
  info->set_num_heads(config.num_heads);
  info->set_num_kv_heads(config.num_kv_heads);
  info->set_head_dim(config.head_dim);
  info->set_hidden_size(config.hidden_size);
  info->set_device(backend.device);
  info->set_server_version(backend.version);
  info->set_server_commit(backend.commit);
  v1::KvCacheInfo* kv = info->mutable_kv_cache();
  kv->set_num_blocks(snapshot.num_kv_blocks_total);
  kv->set_block_size(engine.kv_block_size());
  kv->set_num_tokens(static_cast<int64_t>(snapshot.num_kv_blocks_total) * engine.kv_block_size());
  kv->set_num_blocks_used(snapshot.num_kv_blocks_used);
  kv->set_prefix_caching(snapshot.prefix_caching);
  kv->set_num_blocks_cached(snapshot.num_kv_blocks_cached);
  v1::Limits* l = info->mutable_limits();
  l->set_max_new_tokens(limits.max_new_tokens);
  l->set_max_stop_strings(limits.max_stop_strings);
  l->set_max_stop_string_length(limits.max_stop_string_length);
  l->set_max_stop_token_ids(limits.max_stop_token_ids);
  l->set_max_top_logprobs(limits.max_top_logprobs);
  l->set_max_num_seqs(backend.engine_options.max_num_seqs);
  l->set_max_batch_tokens(backend.engine_options.max_batch_tokens);
  l->set_max_waiting(backend.engine_options.max_waiting);
  v1::EngineState* state = info->mutable_engine();
  state->set_num_running(snapshot.num_running);
  state->set_num_waiting(snapshot.num_waiting);
  state->set_num_steps(snapshot.num_steps);
}

}  // namespace flashserve::api
