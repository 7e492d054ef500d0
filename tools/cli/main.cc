// flashserve-cli: command-line client of the flashserve gRPC API (contract in docs/design.md
// and docs/api.md).
//
//   flashserve-cli [global flags] COMMAND [flags]      COMMAND --help prints its flags
//   (global flags: --target, --lb, --tls-ca, --tls-cert, --tls-key, --tls-server-name,
//   --token-file)
//
// Commands: generate, chat, tokenize, detokenize, info, health, load.
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "tools/cli/channel.h"
#include "tools/cli/commands.h"

namespace {

constexpr char kGlobal[] = R"(usage: flashserve-cli [global flags] COMMAND [flags]

global flags:
  --target HOST:PORT     server address (default 127.0.0.1:50051); any gRPC target, e.g.
                         dns:///flashserve-headless.default.svc.cluster.local:50051
  --lb POLICY            load balancing over the target's addresses: pick_first (default) or
                         round_robin (one request per address in turn; for a headless Service)
  --tls-ca FILE          use TLS, trusting the server certificate's CA in FILE (PEM)
  --tls-cert FILE        client certificate (PEM) for mTLS, with --tls-key
  --tls-key FILE         private key of --tls-cert
  --tls-server-name NAME name expected in the server certificate (default: the target host)
  --token-file FILE      send "authorization: Bearer TOKEN" (TOKEN = FILE's first line)
)";

constexpr char kGenerationFlags[] = R"(
generation flags:
  --max-tokens N  --temperature T  --top-k K  --top-p P  --min-p P  --repetition-penalty R
  --presence-penalty X  --frequency-penalty X  --seed S  --stop TEXT (repeatable)
  --stop-token-id ID (repeatable)  --ignore-eos  --logprobs TOP_N  --timeout SECONDS
)";

const std::map<std::string, std::string>& command_usage() {
  static const auto* usage = new std::map<std::string, std::string>{
      {"generate", "generate --prompt TEXT [--stream] [generation flags]\n"},
      {"chat",
       "chat     [--system TEXT] [--message ROLE:TEXT ...] [--stream] [generation flags]\n"
       "         without --message: interactive, one user message per stdin line\n"},
      {"tokenize",
       "tokenize --text TEXT [--add-special] [--parse-special] [--pieces] [--timeout S]\n"
       "         prints the token ids\n"},
      {"detokenize", "detokenize --ids \"1,2,3\" [--skip-special] [--timeout S]\n"},
      {"info", "info     [--json] [--timeout S]   model, KV cache and limits\n"},
      {"health",
       "health   [--service NAME] [--wait SECONDS] [--timeout S]\n"
       "         prints SERVING/NOT_SERVING; exit 0 iff SERVING\n"},
      {"load",
       "load     [--concurrency C] [--requests N] [--prompt TEXT | --prompt-tokens N]\n"
       "         [generation flags]   throughput and TTFT / inter-token percentiles\n"},
  };
  return *usage;
}

bool takes_generation_flags(const std::string& command) {
  return command == "generate" || command == "chat" || command == "load";
}

std::string full_usage() {
  std::string out = std::string(kGlobal) + "\ncommands:\n";
  for (const auto& [name, text] : command_usage()) out += "  " + text;
  return out + kGenerationFlags;
}

std::string usage_of(const std::string& command) {
  std::string out = "usage: flashserve-cli [global flags] " + command_usage().at(command);
  if (takes_generation_flags(command)) out += kGenerationFlags;
  return out + "\n(flashserve-cli --help lists the global flags)\n";
}

// Global flags before the command; returns the index of the command, or -1 on a bad flag.
int parse_global(const std::vector<std::string>& args, flashserve::cli::ChannelOptions* o) {
  const std::map<std::string, std::string*> flags = {
      {"--target", &o->target},       {"--tls-ca", &o->tls_ca},
      {"--tls-cert", &o->tls_cert},   {"--tls-key", &o->tls_key},
      {"--tls-server-name", &o->tls_server_name}, {"--token-file", &o->token_file},
      {"--lb", &o->lb_policy}};
  size_t i = 0;
  for (; i < args.size() && args[i].rfind("--", 0) == 0; ++i) {
    const size_t eq = args[i].find('=');
    const std::string name = args[i].substr(0, eq);
    const auto flag = flags.find(name);
    if (flag == flags.end()) return -1;
    if (eq != std::string::npos) {
      *flag->second = args[i].substr(eq + 1);
    } else if (i + 1 < args.size()) {
      *flag->second = args[++i];
    } else {
      return -1;
    }
  }
  return static_cast<int>(i);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flashserve::cli;
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
    std::cout << full_usage();
    return kExitOk;
  }
  ChannelOptions channel_options;
  channel_options.target = "127.0.0.1:50051";
  const int at = parse_global(args, &channel_options);
  if (at < 0 || at >= static_cast<int>(args.size())) {
    std::cerr << "flashserve-cli: " << (at < 0 ? "unknown or incomplete global flag\n" : "")
              << full_usage();
    return kExitUsage;
  }
  const std::string command = args[at];
  const std::vector<std::string> rest(args.begin() + at + 1, args.end());
  if (command_usage().count(command) == 0) {
    std::cerr << "flashserve-cli: unknown command '" << command << "'\n" << full_usage();
    return kExitUsage;
  }
  for (const std::string& a : rest) {
    if (a == "--help" || a == "-h") {
      std::cout << usage_of(command);
      return kExitOk;
    }
  }
  auto channel = make_channel(channel_options);
  if (!channel.ok()) {
    std::cerr << "flashserve-cli: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  const CliContext ctx{channel_options.target, *channel};
  if (command == "generate") return run_generate(ctx, rest);
  if (command == "chat") return run_chat(ctx, rest);
  if (command == "tokenize") return run_tokenize(ctx, rest);
  if (command == "detokenize") return run_detokenize(ctx, rest);
  if (command == "info") return run_info(ctx, rest);
  if (command == "health") return run_health(ctx, rest);
  return run_load(ctx, rest);
}
