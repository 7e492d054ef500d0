// flashserve-cli: command-line client of the flashserve gRPC API (contract in docs/design.md).
//
//   flashserve-cli [--target HOST:PORT] [--lb pick_first|round_robin] COMMAND [flags]
//
// Commands: generate, chat, tokenize, detokenize, info, health, load. `flashserve-cli help`
// lists their flags.
#include <iostream>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "tools/cli/commands.h"

namespace {

constexpr char kUsage[] = R"(usage: flashserve-cli [--target HOST:PORT] [--lb POLICY] COMMAND [flags]

  --target HOST:PORT   server address (default 127.0.0.1:50051); any gRPC target, e.g.
                       dns:///flashserve-headless.default.svc.cluster.local:50051
  --lb POLICY          load balancing over the target's addresses: pick_first (default) or
                       round_robin (one request per address in turn; for a headless Service)

commands:
  generate --prompt TEXT [--stream] [generation flags]
  chat     [--system TEXT] [--message ROLE:TEXT ...] [--stream] [generation flags]
           without --message: interactive, one user message per stdin line
  tokenize --text TEXT [--add-special] [--parse-special] [--pieces]   prints the token ids
  detokenize --ids "1,2,3" [--skip-special]
  info     [--json]                        model, KV cache and limits
  health   [--service NAME] [--wait SECONDS]  prints SERVING/NOT_SERVING; exit 0 iff SERVING
  load     [--concurrency C] [--requests N] [--prompt TEXT | --prompt-tokens N]
           [generation flags]              throughput and TTFT / inter-token percentiles

generation flags:
  --max-tokens N  --temperature T  --top-k K  --top-p P  --min-p P  --repetition-penalty R
  --presence-penalty X  --frequency-penalty X  --seed S  --stop TEXT (repeatable)
  --stop-token-id ID (repeatable)  --ignore-eos  --logprobs TOP_N  --timeout SECONDS
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace flashserve::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string target = "127.0.0.1:50051";
  std::string lb_policy = "pick_first";
  size_t i = 0;
  // Global flags come before the command.
  while (i < args.size() && args[i].rfind("--", 0) == 0) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << kUsage;
      return kExitOk;
    }
    if (args[i].rfind("--target=", 0) == 0) {
      target = args[i].substr(9);
    } else if (args[i] == "--target" && i + 1 < args.size()) {
      target = args[++i];
    } else if (args[i].rfind("--lb=", 0) == 0) {
      lb_policy = args[i].substr(5);
    } else if (args[i] == "--lb" && i + 1 < args.size()) {
      lb_policy = args[++i];
    } else {
      std::cerr << "flashserve-cli: unknown or incomplete flag " << args[i] << "\n" << kUsage;
      return kExitUsage;
    }
    ++i;
  }
  if (i >= args.size()) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string command = args[i];
  const std::vector<std::string> rest(args.begin() + i + 1, args.end());
  if (command == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  if (lb_policy != "pick_first" && lb_policy != "round_robin") {
    std::cerr << "flashserve-cli: --lb '" << lb_policy
              << "' is not one of pick_first, round_robin\n";
    return kExitUsage;
  }
  grpc::ChannelArguments channel_args;
  channel_args.SetLoadBalancingPolicyName(lb_policy);
  CliContext ctx{target, grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                                   channel_args)};
  if (command == "generate") return run_generate(ctx, rest);
  if (command == "chat") return run_chat(ctx, rest);
  if (command == "tokenize") return run_tokenize(ctx, rest);
  if (command == "detokenize") return run_detokenize(ctx, rest);
  if (command == "info") return run_info(ctx, rest);
  if (command == "health") return run_health(ctx, rest);
  if (command == "load") return run_load(ctx, rest);
  std::cerr << "flashserve-cli: unknown command '" << command << "'\n" << kUsage;
  return kExitUsage;
}
