#include "server/api/generation_service.h"

#include "absl/strings/str_format.h"
#include "server/api/generation_calls.h"
#include "server/api/grpc_status.h"
#include "server/api/utf8.h"
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

void GenerationService::record_rejected(const absl::Status& refusal) {
  if (metrics_ != nullptr) metrics_->record_request(metrics::rejected_status(refusal));
}

absl::StatusOr<engine::GenerationRequest> GenerationService::prepare(
    const grpc::CallbackServerContext& context, const v1::GenerateRequest& request,
    const Backend& backend) {
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

grpc::ServerUnaryReactor* GenerationService::Generate(grpc::CallbackServerContext* context,
                                                      const v1::GenerateRequest* request,
                                                      v1::GenerateResponse* response) {
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) {
    record_rejected(absl::UnavailableError("model is loading"));
    return finish_unary(context, loading_status());
  }
  auto* call = new GenerateCall(backend->engine, response, logger_);
  auto prepared = prepare(*context, *request, *backend);
  if (!prepared.ok()) {
    call->reject(to_grpc_status(prepared.status()));
  } else {
    call->submit(std::move(*prepared));
  }
  return call;
}

grpc::ServerWriteReactor<v1::GenerateStreamResponse>* GenerationService::GenerateStream(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) {
    record_rejected(absl::UnavailableError("model is loading"));
    auto* call = new GenerateStreamCall(nullptr, logger_);
    call->reject(loading_status());
    return call;
  }
  auto* call = new GenerateStreamCall(backend->engine, logger_);
  auto prepared = prepare(*context, *request, *backend);
  if (!prepared.ok()) {
    call->reject(to_grpc_status(prepared.status()));
  } else {
    call->submit(std::move(*prepared));
  }
  return call;
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) return finish_unary(context, loading_status());
  const PromptContext& ctx = backend->prompt;
  std::vector<int32_t> ids;
  switch (request->input_case()) {
    case v1::TokenizeRequest::kText:
      if (request->text().size() > static_cast<size_t>(ctx.limits.max_input_bytes)) {
        return finish_unary(
            context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  absl::StrFormat("text: is %d bytes, at most %d",
                                                  request->text().size(),
                                                  ctx.limits.max_input_bytes)));
      }
      ids = ctx.tokenizer->encode(request->text(), request->add_special_tokens(),
                                  request->parse_special());
      break;
    case v1::TokenizeRequest::kChat: {
      if (auto st = validate_chat(request->chat(), ctx.limits); !st.ok()) {
        return finish_unary(context, to_grpc_status(st));
      }
      auto text = render_chat(request->chat(), ctx);
      if (!text.ok()) return finish_unary(context, to_grpc_status(text.status()));
      ids = ctx.tokenizer->encode(*text, request->add_special_tokens(), /*parse_special=*/true);
      break;
    }
    case v1::TokenizeRequest::INPUT_NOT_SET:
      return finish_unary(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                                "input: one of text or chat is required"));
  }
  for (int32_t id : ids) {
    response->add_token_ids(id);
    response->add_pieces(escape_invalid_utf8(ctx.tokenizer->token_bytes(id)));
  }
  return finish_unary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* context,
                                                        const v1::DetokenizeRequest* request,
                                                        v1::DetokenizeResponse* response) {
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) return finish_unary(context, loading_status());
  const model::Tokenizer& tokenizer = *backend->prompt.tokenizer;
  if (auto st = validate_token_ids(request->token_ids(), tokenizer.vocab_size(), "token_ids");
      !st.ok()) {
    return finish_unary(context, to_grpc_status(st));
  }
  const std::vector<int32_t> ids(request->token_ids().begin(), request->token_ids().end());
  response->set_text(replace_invalid_utf8(tokenizer.decode(ids, request->skip_special_tokens())));
  return finish_unary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetModelInfoRequest*,
                                                          v1::ModelInfo* info) {
  const Backend* backend = backend_.load(std::memory_order_acquire);
  if (backend == nullptr) return finish_unary(context, loading_status());
  const engine::Engine& engine = *backend->engine;
  const model::ModelConfig& config = engine.model_config();
  const RequestLimits& limits = backend->prompt.limits;
  const engine::EngineSnapshot snapshot = engine.snapshot();
  info->set_architecture(replace_invalid_utf8(config.architecture));
  info->set_name(replace_invalid_utf8(config.name));
  info->set_context_length(limits.context_length);
  info->set_vocab_size(config.vocab_size);
  info->set_num_layers(config.num_layers);
  info->set_num_heads(config.num_heads);
  info->set_num_kv_heads(config.num_kv_heads);
  info->set_head_dim(config.head_dim);
  info->set_hidden_size(config.hidden_size);
  info->set_device(backend->device);
  info->set_server_version(backend->version);
  info->set_server_commit(backend->commit);
  v1::KvCacheInfo* kv = info->mutable_kv_cache();
  kv->set_num_blocks(snapshot.num_kv_blocks_total);
  kv->set_block_size(engine.kv_block_size());
  kv->set_num_tokens(static_cast<int64_t>(snapshot.num_kv_blocks_total) * engine.kv_block_size());
  kv->set_num_blocks_used(snapshot.num_kv_blocks_used);
  v1::Limits* l = info->mutable_limits();
  l->set_max_new_tokens(limits.max_new_tokens);
  l->set_max_stop_strings(limits.max_stop_strings);
  l->set_max_stop_string_length(limits.max_stop_string_length);
  l->set_max_stop_token_ids(limits.max_stop_token_ids);
  l->set_max_top_logprobs(limits.max_top_logprobs);
  l->set_max_num_seqs(backend->engine_options.max_num_seqs);
  l->set_max_batch_tokens(backend->engine_options.max_batch_tokens);
  l->set_max_waiting(backend->engine_options.max_waiting);
  v1::EngineState* state = info->mutable_engine();
  state->set_num_running(snapshot.num_running);
  state->set_num_waiting(snapshot.num_waiting);
  state->set_num_steps(snapshot.num_steps);
  return finish_unary(context, grpc::Status::OK);
}

}  // namespace flashserve::api
