#pragma once
// flashserve.v1.Generation on the gRPC callback API. Until set_backend() is called (the model
// is still loading) every method answers UNAVAILABLE; afterwards requests are validated
// (validation.h), rendered/tokenized (prompt.h) and submitted to the engine, whose events
// are written back by the reactors of generation_calls.h.
#include <atomic>
#include <string>

#include "flashserve/v1/generation.grpc.pb.h"
#include "model/text/chat_template.h"
#include "model/text/tokenizer.h"
#include "server/api/auth.h"
#include "server/api/log.h"
#include "server/api/prompt.h"
#include "server/engine/engine.h"

namespace flashserve::metrics {
class Metrics;
}

namespace flashserve::api {

// Everything the service needs once the model is loaded. Owned by the Server; must outlive
// the gRPC server.
struct Backend {
  engine::Engine* engine = nullptr;
  PromptContext prompt;            // tokenizer, chat template, limits
  engine::EngineOptions engine_options;
  std::string device;              // "cpu", "cuda:0"
  std::string version;             // of this server build
  std::string commit;              // git commit it was built from
};

// Every method is gRPC's raw callback variant: the service parses the request itself
// (raw_messages.h) so that malformed bytes get INVALID_ARGUMENT with a reason.
using RawGenerationService = v1::Generation::WithRawCallbackMethod_Generate<
    v1::Generation::WithRawCallbackMethod_GenerateStream<
        v1::Generation::WithRawCallbackMethod_Tokenize<
            v1::Generation::WithRawCallbackMethod_Detokenize<
                v1::Generation::WithRawCallbackMethod_GetModelInfo<v1::Generation::Service>>>>>;

class GenerationService final : public RawGenerationService {
 public:
  // `metrics` may be null; it counts the requests refused before the engine.
  // `auth` may be null (no token auth); otherwise every method first checks the call's token
  // (UNAUTHENTICATED). `logger` (may be null) receives one access line per generation call.
  // All must outlive the service.
  explicit GenerationService(metrics::Metrics* metrics, const TokenAuth* auth = nullptr,
                             const Logger* logger = nullptr)
      : metrics_(metrics), auth_(auth), logger_(logger) {}

  // Publishes the loaded model. Called once; `backend` must outlive the service.
  void set_backend(const Backend* backend) { backend_.store(backend, std::memory_order_release); }
  bool has_backend() const { return backend_.load(std::memory_order_acquire) != nullptr; }

  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerateStream(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

 private:
  // The typed bodies of the synchronous methods.
  grpc::Status tokenize(const Backend& backend, const v1::TokenizeRequest& request,
                        v1::TokenizeResponse* response) const;
  grpc::Status detokenize(const Backend& backend, const v1::DetokenizeRequest& request,
                          v1::DetokenizeResponse* response) const;
  void get_model_info(const Backend& backend, v1::ModelInfo* info) const;
  // Authorizes and parses a request; OK or the status to finish the call with.
  grpc::Status accept(const grpc::CallbackServerContext& context, const grpc::ByteBuffer& bytes,
                      google::protobuf::Message* request) const;
  // Validation + prompt building for both generation calls; records the refusal's status
  // (metrics::rejected_status) on error.
  absl::StatusOr<engine::GenerationRequest> prepare(const grpc::CallbackServerContext& context,
                                                    const v1::GenerateRequest& request,
                                                    const Backend& backend);
  void record_rejected(const absl::Status& refusal);
  void record_refused_call(const grpc::Status& status);  // by accept()
  grpc::Status authorize(const grpc::CallbackServerContext& context) const {
    return auth_ == nullptr ? grpc::Status::OK : auth_->check(context);
  }

  std::atomic<const Backend*> backend_{nullptr};
  metrics::Metrics* metrics_;
  const TokenAuth* auth_;
  const Logger* logger_;
};

// The call's deadline on the steady clock; unset when the client gave none.
std::optional<std::chrono::steady_clock::time_point> steady_deadline(
    std::chrono::system_clock::time_point deadline);

}  // namespace flashserve::api
