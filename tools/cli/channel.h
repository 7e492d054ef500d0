#pragma once
// The channel flashserve-cli talks through: plaintext, or TLS with the server's CA
// (--tls-ca), optionally presenting a client certificate (--tls-cert/--tls-key, for mTLS);
// with --token-file every call carries `authorization: Bearer <token>` (a client interceptor,
// so it works on plaintext channels too).
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace flashserve::cli {

struct ChannelOptions {
  std::string target;           // HOST:PORT
  std::string tls_ca;           // PEM file; non-empty = TLS
  std::string tls_cert;         // PEM client certificate (with tls_key)
  std::string tls_key;
  std::string tls_server_name;  // expected name in the server's certificate (default: host)
  std::string token_file;       // first non-comment line is the token
  std::string lb_policy = "pick_first";  // or round_robin
};

// InvalidArgument naming the flag when a file cannot be read or the set is incomplete.
absl::StatusOr<std::shared_ptr<grpc::Channel>> make_channel(const ChannelOptions& options);

}  // namespace flashserve::cli
