#include "tools/cli/channel.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/support/client_interceptor.h"

namespace flashserve::cli {
namespace {

absl::StatusOr<std::string> read_file(const std::string& flag, const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read '", path, "'"));
  }
  return text.str();
}

absl::StatusOr<std::string> read_token(const std::string& path) {
  auto text = read_file("token-file", path);
  if (!text.ok()) return text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty() && line.front() != '#') return std::string(line);
  }
  return absl::InvalidArgumentError(absl::StrCat("--token-file: '", path, "' holds no token"));
}

// Adds the bearer token to every call's initial metadata.
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(std::string header) : header_(std::move(header)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", header_});
    }
    methods->Proceed();
  }

 private:
  std::string header_;
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(header_);
  }

 private:
  std::string header_;
};

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials(const ChannelOptions& o) {
  if (o.tls_ca.empty()) {
    if (!o.tls_cert.empty() || !o.tls_key.empty()) {
      return absl::InvalidArgumentError("--tls-cert/--tls-key need --tls-ca (the server's CA)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions ssl;
  auto ca = read_file("tls-ca", o.tls_ca);
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *ca;
  if (!o.tls_cert.empty()) {
    auto cert = read_file("tls-cert", o.tls_cert);
    if (!cert.ok()) return cert.status();
    auto key = read_file("tls-key", o.tls_key);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> make_channel(const ChannelOptions& o) {
  if (o.lb_policy != "pick_first" && o.lb_policy != "round_robin") {
    return absl::InvalidArgumentError(
        absl::StrCat("--lb '", o.lb_policy, "' is not one of pick_first, round_robin"));
  }
  auto creds = credentials(o);
  if (!creds.ok()) return creds.status();
  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName(o.lb_policy);
  if (!o.tls_server_name.empty()) {
    args.SetString(GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, o.tls_server_name);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  if (!o.token_file.empty()) {
    auto token = read_token(o.token_file);
    if (!token.ok()) return token.status();
    factories.push_back(std::make_unique<TokenInterceptorFactory>(*token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(o.target, *creds, args,
                                                                 std::move(factories));
}

}  // namespace flashserve::cli
