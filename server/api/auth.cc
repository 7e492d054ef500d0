#include "server/api/auth.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace flashserve::api {
namespace {

constexpr absl::string_view kBearer = "Bearer";

const grpc::Status& unauthenticated() {
  static const grpc::Status* status = new grpc::Status(
      grpc::StatusCode::UNAUTHENTICATED,
      "this server requires a valid bearer token in the 'authorization' metadata");
  return *status;
}

absl::StatusOr<std::vector<std::string>> read_tokens(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-token-file: cannot read '", path, "'"));
  }
  std::stringstream text;
  text << file.rdbuf();
  std::vector<std::string> tokens = parse_token_file(text.str());
  if (tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-token-file: '", path, "' holds no token"));
  }
  return tokens;
}

}  // namespace

std::vector<std::string> parse_token_file(absl::string_view text) {
  std::vector<std::string> tokens;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    tokens.emplace_back(line);
  }
  return tokens;
}

bool constant_time_equals(absl::string_view presented, absl::string_view expected) {
  // Every byte of `presented` is compared (against `expected` cyclically), whatever the
  // lengths; a length mismatch is folded into the same accumulator.
  volatile unsigned char diff = presented.size() != expected.size() ? 1 : 0;
  if (expected.empty()) return presented.empty();
  for (size_t i = 0; i < presented.size(); ++i) {
    diff = diff | static_cast<unsigned char>(presented[i] ^ expected[i % expected.size()]);
  }
  return diff == 0;
}

absl::StatusOr<std::unique_ptr<TokenAuth>> TokenAuth::load(const std::string& path) {
  std::unique_ptr<TokenAuth> auth(new TokenAuth(path));
  RETURN_IF_ERROR(auth->reload());
  return auth;
}

absl::Status TokenAuth::reload() {
  ASSIGN_OR_RETURN(std::vector<std::string> tokens, read_tokens(path_));
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::move(tokens);
  return absl::OkStatus();
}

bool TokenAuth::accepts(absl::string_view token) const {
  std::lock_guard<std::mutex> lock(mu_);
  bool found = false;
  for (const std::string& accepted : tokens_) {
    found = constant_time_equals(token, accepted) | found;  // no early exit
  }
  return found;
}

bool TokenAuth::accepts_authorization(absl::string_view value) const {
  // RFC 7235: the scheme is case-insensitive and one or more spaces follow it.
  if (value.size() <= kBearer.size() || !absl::StartsWithIgnoreCase(value, kBearer) ||
      value[kBearer.size()] != ' ') {
    return false;
  }
  value.remove_prefix(kBearer.size());
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  return accepts(value);
}

grpc::Status TokenAuth::check(const grpc::ServerContextBase& context) const {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it != metadata.end() &&
      accepts_authorization(absl::string_view(it->second.data(), it->second.size()))) {
    return grpc::Status::OK;
  }
  if (on_failure_) on_failure_();
  return unauthenticated();
}

int TokenAuth::num_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(tokens_.size());
}

}  // namespace flashserve::api
