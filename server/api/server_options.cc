#include "server/api/server_options.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace flashserve::api {
namespace {

absl::Status bad(absl::string_view flag, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", problem));
}

absl::Status at_least(absl::string_view flag, int64_t value, int64_t minimum,
                      absl::string_view why) {
  if (value >= minimum) return absl::OkStatus();
  return bad(flag, absl::StrCat(value, " must be >= ", minimum, " (", why, ")"));
}

absl::Status readable(absl::string_view flag, const std::string& path) {
  if (path.empty() || access(path.c_str(), R_OK) == 0) return absl::OkStatus();
  return bad(flag, absl::StrCat("'", path, "' cannot be read"));
}

absl::Status validate_ports(const ServerOptions& o) {
  if (o.port < 0 || o.port > 65535) return bad("port", absl::StrCat(o.port, " is not a port"));
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return bad("metrics-port", absl::StrCat(o.metrics_port, " is not a port (or -1 for none)"));
  }
  if (o.http_port < -1 || o.http_port > 65535) {
    return bad("http-port", absl::StrCat(o.http_port, " is not a port (or -1 for none)"));
  }
  return absl::OkStatus();
}

absl::Status validate_engine(const ServerOptions& o) {
  const engine::EngineOptions& e = o.engine;
  RETURN_IF_ERROR(at_least("max-num-seqs", e.max_num_seqs, 1, "sequences per step"));
  RETURN_IF_ERROR(at_least("max-batch-tokens", e.max_batch_tokens, 0,
                           "tokens per step; 0 = the backend's default"));
  RETURN_IF_ERROR(at_least("max-waiting", e.max_waiting, 1,
                           "0 would refuse every request with RESOURCE_EXHAUSTED"));
  if (e.max_context != 0 && e.max_context < 2) {
    return bad("max-context", absl::StrCat(e.max_context,
                                           " must be 0 (the model's) or >= 2 (one prompt "
                                           "token and one generated token)"));
  }
  if (e.max_context < 0) return bad("max-context", absl::StrCat(e.max_context, " is negative"));
  if (e.stall_threshold.count() <= 0) {
    return bad("stall-timeout", absl::StrCat(e.stall_threshold.count(), " ms must be > 0"));
  }
  RETURN_IF_ERROR(at_least("kv-cache-mb", o.kv_cache_mb, 0, "0 = the loader's default"));
  RETURN_IF_ERROR(
      at_least("kv-cache-tokens", o.kv_cache_tokens, 0, "0 = the backend's default"));
  if (!(o.gpu_memory_fraction > 0 && o.gpu_memory_fraction <= 1)) {
    return bad("gpu-memory-fraction", absl::StrCat(o.gpu_memory_fraction, " must be in (0, 1]"));
  }
  return at_least("threads", o.num_threads, 0, "0 = every core");
}

absl::Status validate_security(const ServerOptions& o) {
  const TlsOptions& tls = o.tls;
  if (tls.cert_path.empty() != tls.key_path.empty()) {
    return tls.cert_path.empty() ? bad("tls-key", "is given without --tls-cert (TLS needs both)")
                                 : bad("tls-cert", "is given without --tls-key (TLS needs both)");
  }
  if (!tls.client_ca_path.empty() && tls.cert_path.empty()) {
    return bad("tls-client-ca", "needs --tls-cert and --tls-key (mTLS is on top of TLS)");
  }
  RETURN_IF_ERROR(readable("tls-cert", tls.cert_path));
  RETURN_IF_ERROR(readable("tls-key", tls.key_path));
  RETURN_IF_ERROR(readable("tls-client-ca", tls.client_ca_path));
  return readable("auth-token-file", o.auth.token_file);
}

}  // namespace

absl::Status validate_server_options(const ServerOptions& o) {
  if (o.model_path.empty()) return bad("model", "is required");
  RETURN_IF_ERROR(validate_ports(o));
  RETURN_IF_ERROR(validate_engine(o));
  if (o.drain_timeout.count() < 0) {
    return bad("drain-timeout", absl::StrCat(o.drain_timeout.count() / 1000.0,
                                             " s is negative (0 = cancel at once)"));
  }
  return validate_security(o);
}

absl::StatusOr<std::chrono::milliseconds> seconds_flag(absl::string_view flag, double seconds) {
  constexpr double kMaxSeconds = 24 * 3600;
  if (!std::isfinite(seconds) || seconds < 0 || seconds > kMaxSeconds) {
    return bad(flag, absl::StrCat(seconds, " s must be in [0, ", kMaxSeconds, "] seconds"));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

absl::StatusOr<model::LoadOptions> load_options(const ServerOptions& options) {
  model::LoadOptions load;
  ASSIGN_OR_RETURN(load.device, model::parse_device(options.device));
  load.num_threads = options.num_threads;
  load.kv_cache_mb = options.kv_cache_mb;
  load.kv_cache_tokens = options.kv_cache_tokens;
  load.gpu_memory_fraction = options.gpu_memory_fraction;
  load.cuda_graphs = options.cuda_graphs;
  ASSIGN_OR_RETURN(load.weights, model::parse_weights(options.weights));
  load.max_num_seqs = options.engine.max_num_seqs;
  load.max_batch_tokens = options.engine.max_batch_tokens;
  return load;
}

}  // namespace flashserve::api
