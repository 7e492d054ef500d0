#pragma once
// flashserve-cli sub-commands. Each takes the flags after its name and returns the process
// exit code: 0 on success, 1 when the server answered with an error (printed to stderr as
// "flashserve-cli: CODE: message"), 2 for bad command-line usage.
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"

namespace flashserve::cli {

struct CliContext {
  std::string target;                      // HOST:PORT
  std::shared_ptr<grpc::Channel> channel;  // to target (plaintext or TLS, see channel.h)
};

inline constexpr int kExitOk = 0;
inline constexpr int kExitRpcError = 1;
inline constexpr int kExitUsage = 2;

int run_generate(const CliContext& ctx, const std::vector<std::string>& argv);
int run_chat(const CliContext& ctx, const std::vector<std::string>& argv);
int run_tokenize(const CliContext& ctx, const std::vector<std::string>& argv);
int run_detokenize(const CliContext& ctx, const std::vector<std::string>& argv);
int run_info(const CliContext& ctx, const std::vector<std::string>& argv);
int run_health(const CliContext& ctx, const std::vector<std::string>& argv);
int run_load(const CliContext& ctx, const std::vector<std::string>& argv);  // load.cc

// Prints "flashserve-cli: CODE_NAME: message" to stderr.
void print_rpc_error(const grpc::Status& status);
// "OK", "INVALID_ARGUMENT", ...
const char* status_code_name(grpc::StatusCode code);

}  // namespace flashserve::cli
