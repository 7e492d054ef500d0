#pragma once
// Bearer-token authentication for the gRPC services.
//
// Clients send `authorization: Bearer <token>` metadata (the scheme in any case). The accepted tokens are read from a
// file (one per line; blank lines and lines starting with '#' are ignored; surrounding
// whitespace is trimmed) and can be re-read while serving (SIGHUP -> reload()). A call with a
// missing, malformed or unknown token gets UNAUTHENTICATED with one message for all three
// cases, so a client cannot tell which part failed. Tokens are compared in time that depends
// only on the presented token's length, never on where it differs from an accepted one.
//
// Thread-safety: check()/accepts() from any thread, concurrently with reload().
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"

namespace flashserve::api {

class TokenAuth {
 public:
  // NotFound/PermissionDenied-like errors as InvalidArgument naming the file when it cannot be
  // read; InvalidArgument when it holds no token.
  static absl::StatusOr<std::unique_ptr<TokenAuth>> load(const std::string& path);

  // Re-reads the file. On error the tokens in use stay unchanged.
  absl::Status reload();
  // True when `token` equals one of the accepted tokens.
  bool accepts(absl::string_view token) const;
  // True when an `authorization` value is "Bearer TOKEN" with an accepted token; the scheme
  // in any case ("bearer", RFC 7235), one or more spaces after it.
  bool accepts_authorization(absl::string_view value) const;
  // OK, or UNAUTHENTICATED when the call's metadata does not carry an accepted token.
  grpc::Status check(const grpc::ServerContextBase& context) const;
  int num_tokens() const;
  // Called (on the calling thread) for every check() that refuses a call, e.g. to count it.
  // Set before serving; not synchronized with check().
  void set_on_failure(std::function<void()> on_failure) { on_failure_ = std::move(on_failure); }

 private:
  explicit TokenAuth(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  mutable std::mutex mu_;  // std::mutex: visible to ThreadSanitizer
  std::vector<std::string> tokens_;  // guarded by mu_
  std::function<void()> on_failure_;
};

// The tokens in a token file's text (see above). Exposed for tests.
std::vector<std::string> parse_token_file(absl::string_view text);
// Equality in time that depends on presented.size() only.
bool constant_time_equals(absl::string_view presented, absl::string_view expected);

}  // namespace flashserve::api
