#include "server/api/server.h"

#include <atomic>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "flashserve/version.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/resource_quota.h"
#include "model/model_loader.h"
#include "server/api/generation_service.h"
#include "server/api/health.h"
#include "server/api/heap_trimmer.h"
#include "server/api/raw_messages.h"
#include "server/api/reflection.h"
#include "server/api/tls_files.h"
#include "server/http/http_server.h"
#include "server/metrics/metrics.h"

namespace flashserve::api {

std::string default_model_name(const std::string& model_path) {
  const size_t slash = model_path.find_last_of('/');
  std::string name = slash == std::string::npos ? model_path : model_path.substr(slash + 1);
  constexpr std::string_view kSuffix = ".gguf";
  if (name.size() > kSuffix.size() && name.ends_with(kSuffix)) {
    name.resize(name.size() - kSuffix.size());
  }
  return name;
}

namespace {

// "host:port" with IPv6 literals bracketed.
std::string host_port(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

// Plaintext without TLS files; otherwise TLS from the checked files (tls_files.h), and a
// warning when the server certificate has expired.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_credentials(
    const TlsOptions& tls, const Logger& logger) {
  if (tls.cert_path.empty()) return grpc::InsecureServerCredentials();
  ASSIGN_OR_RETURN(TlsFiles files, read_tls_files(tls));
  if (files.expired) {
    logger.log(LogLevel::kWarning,
               absl::StrCat("TLS: the server certificate of --tls-cert '", tls.cert_path,
                            "' expired on ", files.not_after,
                            "; clients that check it refuse every connection"),
               {{"not_after", files.not_after}});
  }
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({std::move(files.key_pem), std::move(files.cert_pem)});
  if (!tls.client_ca_path.empty()) {
    ssl.pem_root_certs = std::move(files.client_ca_pem);
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

void apply_transport_limits(const TransportLimits& limits, grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(limits.max_receive_message_bytes);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                              static_cast<int>(limits.keepalive_time.count()));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                              static_cast<int>(limits.keepalive_timeout.count()));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              static_cast<int>(limits.min_client_ping_interval.count()));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  grpc::ResourceQuota quota("flashserve");
  quota.Resize(static_cast<size_t>(limits.grpc_memory_quota_bytes));
  builder->SetResourceQuota(quota);
}

// The HTTP API's options: the same address, TLS files (checked as gRPC's: tls_files.h) and
// limits as gRPC.
absl::StatusOr<http::HttpOptions> http_options(const ServerOptions& options) {
  http::HttpOptions http;
  http.host = options.host;
  http.port = options.http_port;
  http.max_body_bytes = static_cast<size_t>(options.transport.max_receive_message_bytes);
  if (!options.tls.cert_path.empty()) {
    ASSIGN_OR_RETURN(TlsFiles files, read_tls_files(options.tls));
    http.tls_cert_pem = std::move(files.cert_pem);
    http.tls_key_pem = std::move(files.key_pem);
    http.tls_client_ca_pem = std::move(files.client_ca_pem);
  }
  return http;
}

}  // namespace

class Server::Impl {
 public:
  explicit Impl(const ServerOptions& options)
      : options_(options),
        logger_(options.logger != nullptr ? *options.logger : default_logger()) {}
  ~Impl() { route_protobuf_log(nullptr); }  // logger_ may not outlive the server

  absl::Status start();
  absl::Status start_http();
  void serve(model::LoadedModel model);
  void shutdown();
  bool is_serving() const;

  ServerOptions options_;
  const Logger& logger_;
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<TokenAuth> auth_;  // null without --auth-token-file
  std::unique_ptr<GenerationService> service_;
  std::unique_ptr<HealthService> health_service_;  // NOT_SERVING until the watcher says so
  std::vector<std::unique_ptr<grpc::Service>> reflection_;  // v1, v1alpha
  std::unique_ptr<grpc::Server> grpc_;
  int grpc_port_ = 0;
  std::unique_ptr<http::HttpServer> http_;  // null with --http-port -1
  std::unique_ptr<HealthWatcher> health_;
  std::unique_ptr<HeapTrimmer> heap_trimmer_;  // freed memory back to the system
  std::atomic<bool> draining_{false};
  std::atomic<bool> shut_down_{false};
  std::mutex shutdown_mu_;

  // Set by serve(). Declaration order matters: the engine (which uses the tokenizer)
  // is destroyed before the model.
  model::LoadedModel model_;
  std::unique_ptr<engine::Engine> engine_;
  std::atomic<engine::Engine*> ready_engine_{nullptr};
  Backend backend_;
  std::string backend_summary_;  // the loader's line: device, memory, why
};

absl::Status Server::Impl::start() {
  // Checked every second; trims past 32 MiB of growth with as much free (heap_trimmer.h).
  heap_trimmer_ = std::make_unique<HeapTrimmer>(std::chrono::seconds(1), int64_t{32} << 20);
  install_protobuf_log_handler();  // malformed requests must not flood the log
  install_grpc_log_handler();      // nor failed TLS handshakes; both in --log-format
  route_protobuf_log(&logger_);
  if (options_.metrics_port >= 0) {
    metrics::BuildInfo info;
    info.version = kVersion;
    info.commit = kGitCommit;
    info.device = options_.device;  // what was asked for, until serve() says what it got
    info.model = options_.model_name.empty() ? default_model_name(options_.model_path)
                                             : options_.model_name;
    metrics_ = std::make_unique<metrics::Metrics>(info);
    RETURN_IF_ERROR(metrics_->serve(host_port(options_.host, options_.metrics_port)));
  }
  if (!options_.auth.token_file.empty()) {
    ASSIGN_OR_RETURN(auth_, TokenAuth::load(options_.auth.token_file));
    if (metrics_ != nullptr) {
      auth_->set_on_failure([m = metrics_.get()] { m->record_auth_failure(); });
    }
  }
  ASSIGN_OR_RETURN(const std::shared_ptr<grpc::ServerCredentials> credentials,
                   server_credentials(options_.tls, logger_));
  service_ = std::make_unique<GenerationService>(metrics_.get(), auth_.get(), &logger_);
  health_service_ = std::make_unique<HealthService>(
      std::vector<std::string>{v1::Generation::service_full_name()},
      options_.auth.open_health ? nullptr : auth_.get());
  std::vector<std::string> services = {v1::Generation::service_full_name(),
                                       grpc::health::v1::Health::service_full_name()};
  services.insert(services.end(), std::begin(kReflectionServiceNames),
                  std::end(kReflectionServiceNames));
  reflection_ = make_reflection_services(
      std::move(services), options_.auth.open_reflection ? nullptr : auth_.get());
  grpc::ServerBuilder builder;
  const std::string address = host_port(options_.host, options_.port);
  builder.AddListeningPort(address, credentials, &grpc_port_);
  apply_transport_limits(options_.transport, &builder);
  builder.RegisterService(service_.get());
  builder.RegisterService(health_service_.get());
  for (const auto& reflection : reflection_) builder.RegisterService(reflection.get());
  grpc_ = builder.BuildAndStart();
  if (grpc_ == nullptr || grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", address));
  }
  health_ = std::make_unique<HealthWatcher>(
      health_service_.get(), [this] { return is_serving(); }, options_.health_period);
  return start_http();
}

absl::Status Server::Impl::start_http() {
  if (options_.http_port < 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const http::HttpOptions http, http_options(options_));
  http::HttpContext context;
  context.auth = auth_.get();
  context.open_health = options_.auth.open_health;
  context.metrics = metrics_.get();
  context.logger = &logger_;
  context.model_name = options_.model_name.empty() ? default_model_name(options_.model_path)
                                                   : options_.model_name;
  context.ready = [this] { return is_serving(); };
  context.live = [this] {  // as the gRPC liveness service: down only once the runner failed
    const engine::Engine* engine = ready_engine_.load();
    return engine == nullptr || engine->snapshot().failure.ok();
  };
  ASSIGN_OR_RETURN(http_, http::HttpServer::start(http, std::move(context)));
  return absl::OkStatus();
}

bool Server::Impl::is_serving() const {
  if (draining_.load()) return false;
  const engine::Engine* engine = ready_engine_.load();
  if (engine == nullptr) return false;
  return engine_serving(engine->snapshot());
}

void Server::Impl::serve(model::LoadedModel model) {
  model_ = std::move(model);
  RequestLimits limits = options_.limits;
  limits.context_length = options_.engine.max_context > 0
                              ? std::min(options_.engine.max_context,
                                         model_.config.context_length)
                              : model_.config.context_length;
  limits.vocab_size = model_.tokenizer->vocab_size();
  limits.max_new_tokens = std::min(limits.max_new_tokens, limits.context_length - 1);
  engine::EngineOptions engine_options = options_.engine;
  engine_options.max_context = limits.context_length;
  // --max-batch-tokens 0: the budget the backend chose and sized its workspace for.
  if (engine_options.max_batch_tokens == 0) engine_options.max_batch_tokens = model_.max_batch_tokens;
  engine_options.on_runner_failure = [logger = &logger_,
                                      health = health_service_.get()](const absl::Status& error) {
    health->fail();  // liveness too: only a restart brings the device back
    logger->error("model runner failed; not serving any more", {{"error", error.ToString()}});
  };

  engine_ = std::make_unique<engine::Engine>(std::move(model_.runner), *model_.tokenizer,
                                             engine_options, metrics_.get());
  engine_->start();
  backend_.engine = engine_.get();
  backend_.prompt.tokenizer = model_.tokenizer.get();
  backend_.prompt.chat_template = model_.chat_template ? &*model_.chat_template : nullptr;
  backend_.prompt.limits = limits;
  backend_.engine_options = engine_options;
  backend_.device = model_.device;
  backend_summary_ = model_.backend_summary;
  backend_.version = kVersion;
  backend_.commit = kGitCommit;
  if (metrics_ != nullptr) metrics_->set_device(model_.device);
  service_->set_backend(&backend_);
  if (http_) http_->set_backend(&backend_);
  ready_engine_.store(engine_.get());
}

void Server::Impl::shutdown() {
  // After the engine's drain every generation call has its final status; this is how long
  // gRPC may take to write those out before it cancels what is still open.
  constexpr std::chrono::milliseconds kDeliveryGrace{1000};
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_.exchange(true)) return;
  draining_.store(true);
  if (health_) health_->stop();          // NOT_SERVING from here on
  // New requests UNAVAILABLE; admitted ones finish until the drain limit, then fail.
  if (engine_ && !engine_->drain(options_.drain_timeout)) {
    logger_.error(absl::StrCat("drain limit of ", options_.drain_timeout.count(),
                               " ms passed; unfinished requests failed with UNAVAILABLE"));
  }
  if (health_service_) health_service_->shutdown();  // ends open Watch streams
  if (http_) http_->stop(kDeliveryGrace);
  if (grpc_) {
    grpc_->Shutdown(std::chrono::system_clock::now() + kDeliveryGrace);
    grpc_->Wait();
  }
}

// ---- Server ---------------------------------------------------------------------------------

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (impl_) impl_->shutdown();
}

absl::StatusOr<std::unique_ptr<Server>> Server::start(const ServerOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

void Server::serve(model::LoadedModel model) { impl_->serve(std::move(model)); }

absl::Status Server::reload_auth_tokens() {
  if (impl_->auth_ == nullptr) {
    return absl::FailedPreconditionError("no --auth-token-file: nothing to reload");
  }
  return impl_->auth_->reload();
}

void Server::shutdown() { impl_->shutdown(); }

int Server::grpc_port() const { return impl_->grpc_port_; }

int Server::http_port() const { return impl_->http_ ? impl_->http_->port() : 0; }

int Server::metrics_port() const {
  return impl_->metrics_ ? impl_->metrics_->listening_port() : 0;
}

std::string Server::model_summary() const {
  const engine::Engine* engine = impl_->engine_.get();
  if (engine == nullptr) return "(no model loaded)";
  const model::ModelConfig& c = engine->model_config();
  const engine::EngineSnapshot snapshot = engine->snapshot();
  const RequestLimits& limits = impl_->backend_.prompt.limits;
  return absl::StrFormat(
      "%s (%s: %d layers, hidden %d, %d/%d heads, vocab %d, context %d) on %s; KV cache %d "
      "blocks x %d tokens; chat template %s; %s",
      c.name, c.architecture, c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads,
      c.vocab_size, limits.context_length, impl_->backend_.device,
      snapshot.num_kv_blocks_total, engine->kv_block_size(),
      impl_->backend_.prompt.chat_template
          ? std::string(impl_->backend_.prompt.chat_template->family_name())
          : std::string("none"),
      impl_->backend_summary_);
}

}  // namespace flashserve::api
