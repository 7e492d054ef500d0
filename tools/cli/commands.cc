// generate, chat, tokenize, detokenize, info and health.
#include "tools/cli/commands.h"

#include <chrono>
#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "flashserve/v1/generation.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tools/cli/args.h"
#include "tools/cli/request_flags.h"

namespace flashserve::cli {
namespace {

constexpr auto kDefaultRpcTimeout = std::chrono::seconds(10);

int usage_error(const absl::Status& status) {
  std::cerr << "flashserve-cli: " << status.message() << "\n";
  return kExitUsage;
}

void set_timeout(grpc::ClientContext* context, std::optional<std::chrono::milliseconds> t) {
  if (t) context->set_deadline(std::chrono::system_clock::now() + *t);
}

const char* finish_reason_name(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP: return "stop";
    case v1::FINISH_REASON_LENGTH: return "length";
    case v1::FINISH_REASON_STOP_SEQUENCE: return "stop_sequence";
    case v1::FINISH_REASON_CANCELLED: return "cancelled";
    case v1::FINISH_REASON_DEADLINE_EXCEEDED: return "deadline_exceeded";
    case v1::FINISH_REASON_ERROR: return "error";
    default: return "unspecified";
  }
}

void print_summary(v1::FinishReason reason, const v1::Usage& usage, const v1::Timings& t) {
  std::cerr << absl::StrFormat(
      "[finish: %s | tokens: %d prompt + %d generated | queue %.3f s, ttft %.3f s, total "
      "%.3f s]\n",
      finish_reason_name(reason), usage.prompt_tokens(), usage.completion_tokens(),
      t.queue_seconds(), t.time_to_first_token_seconds(), t.total_seconds());
}

void print_logprobs(const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& logprobs) {
  for (const v1::TokenLogprob& lp : logprobs) {
    std::cerr << absl::StrFormat("  token %d logprob %.4f", lp.token_id(), lp.logprob());
    for (const v1::TopLogprob& top : lp.top()) {
      std::cerr << absl::StrFormat(" | %d:%.4f", top.token_id(), top.logprob());
    }
    std::cerr << "\n";
  }
}

// Runs one generation (streaming or unary), printing text to stdout as it arrives. On
// success `*text` holds the whole completion.
int generate_and_print(const CliContext& ctx, const v1::GenerateRequest& request, bool stream,
                       std::optional<std::chrono::milliseconds> timeout, std::string* text) {
  auto stub = v1::Generation::NewStub(ctx.channel);
  grpc::ClientContext context;
  set_timeout(&context, timeout);
  text->clear();
  if (!stream) {
    v1::GenerateResponse response;
    grpc::Status status = stub->Generate(&context, request, &response);
    if (!status.ok()) {
      print_rpc_error(status);
      return kExitRpcError;
    }
    *text = response.text();
    std::cout << response.text() << std::endl;
    if (request.logprobs()) print_logprobs(response.logprobs());
    print_summary(response.finish_reason(), response.usage(), response.timings());
    return kExitOk;
  }
  auto reader = stub->GenerateStream(&context, request);
  v1::GenerateStreamResponse message;
  v1::GenerationFinal final_message;
  bool have_final = false;
  while (reader->Read(&message)) {
    std::cout << message.text() << std::flush;
    text->append(message.text());
    if (request.logprobs()) print_logprobs(message.logprobs());
    if (message.has_final()) {
      final_message = message.final();
      have_final = true;
    }
  }
  std::cout << std::endl;
  grpc::Status status = reader->Finish();
  if (!status.ok()) {
    print_rpc_error(status);
    return kExitRpcError;
  }
  if (!have_final) {
    std::cerr << "flashserve-cli: the stream ended without a final message\n";
    return kExitRpcError;
  }
  print_summary(final_message.finish_reason(), final_message.usage(), final_message.timings());
  return kExitOk;
}

// "role:text" -> ChatMessage.
absl::StatusOr<v1::ChatMessage> parse_message(const std::string& spec) {
  const size_t colon = spec.find(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--message '", spec, "': expected ROLE:TEXT, e.g. user:Hello"));
  }
  v1::ChatMessage message;
  message.set_role(spec.substr(0, colon));
  message.set_content(spec.substr(colon + 1));
  return message;
}

}  // namespace

const char* status_code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK: return "OK";
    case grpc::CANCELLED: return "CANCELLED";
    case grpc::UNKNOWN: return "UNKNOWN";
    case grpc::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND: return "NOT_FOUND";
    case grpc::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::ABORTED: return "ABORTED";
    case grpc::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::INTERNAL: return "INTERNAL";
    case grpc::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::DATA_LOSS: return "DATA_LOSS";
    case grpc::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN_CODE";
  }
}

void print_rpc_error(const grpc::Status& status) {
  std::cerr << "flashserve-cli: " << status_code_name(status.error_code()) << ": "
            << status.error_message() << "\n";
}

int run_generate(const CliContext& ctx, const std::vector<std::string>& argv) {
  FlagSpec spec{{"prompt"}, {"stream"}};
  add_generation_flags(&spec);
  auto args = Args::parse(argv, spec);
  if (!args.ok()) return usage_error(args.status());
  if (!args->has("prompt")) return usage_error(absl::InvalidArgumentError("--prompt is required"));
  v1::GenerateRequest request;
  request.set_prompt(args->get("prompt"));
  if (auto st = apply_generation_flags(*args, &request); !st.ok()) return usage_error(st);
  auto timeout = timeout_flag(*args);
  if (!timeout.ok()) return usage_error(timeout.status());
  std::string text;
  return generate_and_print(ctx, request, args->has("stream"), *timeout, &text);
}

int run_chat(const CliContext& ctx, const std::vector<std::string>& argv) {
  FlagSpec spec{{"message", "system"}, {"stream"}};
  add_generation_flags(&spec);
  auto args = Args::parse(argv, spec);
  if (!args.ok()) return usage_error(args.status());
  v1::GenerateRequest request;
  if (auto st = apply_generation_flags(*args, &request); !st.ok()) return usage_error(st);
  auto timeout = timeout_flag(*args);
  if (!timeout.ok()) return usage_error(timeout.status());
  v1::ChatInput* chat = request.mutable_chat();
  if (args->has("system")) {
    v1::ChatMessage* system = chat->add_messages();
    system->set_role("system");
    system->set_content(args->get("system"));
  }
  std::string reply;
  if (args->has("message")) {  // one shot
    for (const std::string& m : args->get_all("message")) {
      auto message = parse_message(m);
      if (!message.ok()) return usage_error(message.status());
      *chat->add_messages() = *message;
    }
    return generate_and_print(ctx, request, args->has("stream"), *timeout, &reply);
  }
  // Interactive: each stdin line is a user turn; the conversation is kept.
  std::string line;
  std::cerr << "chat with " << ctx.target << " (one message per line, end with Ctrl-D)\n";
  while (std::cerr << "> " << std::flush, std::getline(std::cin, line)) {
    if (line.empty()) continue;
    v1::ChatMessage* user = chat->add_messages();
    user->set_role("user");
    user->set_content(line);
    const int rc = generate_and_print(ctx, request, /*stream=*/true, *timeout, &reply);
    if (rc != kExitOk) return rc;
    v1::ChatMessage* assistant = chat->add_messages();
    assistant->set_role("assistant");
    assistant->set_content(reply.empty() ? " " : reply);
  }
  return kExitOk;
}

int run_tokenize(const CliContext& ctx, const std::vector<std::string>& argv) {
  auto args = Args::parse(argv, FlagSpec{{"text", "timeout"},
                                         {"add-special", "parse-special", "pieces"}});
  if (!args.ok()) return usage_error(args.status());
  if (!args->has("text")) return usage_error(absl::InvalidArgumentError("--text is required"));
  v1::TokenizeRequest request;
  request.set_text(args->get("text"));
  request.set_add_special_tokens(args->has("add-special"));
  request.set_parse_special(args->has("parse-special"));
  auto timeout = timeout_flag(*args);
  if (!timeout.ok()) return usage_error(timeout.status());
  grpc::ClientContext context;
  set_timeout(&context, timeout->value_or(kDefaultRpcTimeout));
  v1::TokenizeResponse response;
  grpc::Status status = v1::Generation::NewStub(ctx.channel)->Tokenize(&context, request,
                                                                       &response);
  if (!status.ok()) {
    print_rpc_error(status);
    return kExitRpcError;
  }
  if (args->has("pieces")) {
    for (int i = 0; i < response.token_ids_size(); ++i) {
      std::cout << response.token_ids(i) << "\t" << response.pieces(i) << "\n";
    }
  } else {
    std::cout << absl::StrJoin(response.token_ids(), " ") << "\n";
  }
  return kExitOk;
}

int run_detokenize(const CliContext& ctx, const std::vector<std::string>& argv) {
  auto args = Args::parse(argv, FlagSpec{{"ids", "timeout"}, {"skip-special"}});
  if (!args.ok()) return usage_error(args.status());
  if (!args->has("ids")) return usage_error(absl::InvalidArgumentError("--ids is required"));
  v1::DetokenizeRequest request;
  for (absl::string_view part :
       absl::StrSplit(args->get("ids"), absl::ByAnyChar(", "), absl::SkipEmpty())) {
    int id = 0;
    if (!absl::SimpleAtoi(part, &id)) {
      return usage_error(absl::InvalidArgumentError(
          absl::StrCat("--ids: '", part, "' is not an integer")));
    }
    request.add_token_ids(id);
  }
  request.set_skip_special_tokens(args->has("skip-special"));
  auto timeout = timeout_flag(*args);
  if (!timeout.ok()) return usage_error(timeout.status());
  grpc::ClientContext context;
  set_timeout(&context, timeout->value_or(kDefaultRpcTimeout));
  v1::DetokenizeResponse response;
  grpc::Status status = v1::Generation::NewStub(ctx.channel)->Detokenize(&context, request,
                                                                         &response);
  if (!status.ok()) {
    print_rpc_error(status);
    return kExitRpcError;
  }
  std::cout << response.text() << "\n";
  return kExitOk;
}

int run_info(const CliContext& ctx, const std::vector<std::string>& argv) {
  auto args = Args::parse(argv, FlagSpec{{"timeout"}, {"json"}});
  if (!args.ok()) return usage_error(args.status());
  auto timeout = timeout_flag(*args);
  if (!timeout.ok()) return usage_error(timeout.status());
  grpc::ClientContext context;
  set_timeout(&context, timeout->value_or(kDefaultRpcTimeout));
  v1::ModelInfo info;
  grpc::Status status = v1::Generation::NewStub(ctx.channel)->GetModelInfo(
      &context, v1::GetModelInfoRequest(), &info);
  if (!status.ok()) {
    print_rpc_error(status);
    return kExitRpcError;
  }
  if (args->has("json")) {
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.always_print_primitive_fields = true;
    if (!google::protobuf::util::MessageToJsonString(info, &json, options).ok()) return 1;
    std::cout << json;
    return kExitOk;
  }
  const auto& kv = info.kv_cache();
  const auto& lim = info.limits();
  std::cout << absl::StrFormat(
      "model:          %s (%s) on %s\n"
      "context length: %d tokens, vocabulary %d\n"
      "shape:          %d layers, hidden %d, %d heads / %d KV heads, head_dim %d\n"
      "KV cache:       %d blocks x %d tokens = %d tokens (%d blocks in use)\n"
      "limits:         max_new_tokens %d, %d stop strings of <= %d bytes, top_logprobs <= %d\n"
      "batching:       %d sequences, %d tokens per step, %d waiting at most\n"
      "engine:         %d running, %d waiting, %d steps\n",
      info.name(), info.architecture(), info.device(), info.context_length(),
      info.vocab_size(), info.num_layers(), info.hidden_size(), info.num_heads(),
      info.num_kv_heads(), info.head_dim(), kv.num_blocks(), kv.block_size(), kv.num_tokens(),
      kv.num_blocks_used(), lim.max_new_tokens(), lim.max_stop_strings(),
      lim.max_stop_string_length(), lim.max_top_logprobs(), lim.max_num_seqs(),
      lim.max_batch_tokens(), lim.max_waiting(), info.engine().num_running(),
      info.engine().num_waiting(), info.engine().num_steps());
  return kExitOk;
}

// Prints the status; exits 0 only when SERVING. --wait SECONDS polls until SERVING.
int run_health(const CliContext& ctx, const std::vector<std::string>& argv) {
  auto args = Args::parse(argv, FlagSpec{{"service", "wait", "timeout"}, {}});
  if (!args.ok()) return usage_error(args.status());
  auto wait = args->get_double("wait", 0);
  if (!wait.ok()) return usage_error(wait.status());
  auto timeout = timeout_flag(*args);
  if (!timeout.ok()) return usage_error(timeout.status());
  auto stub = grpc::health::v1::Health::NewStub(ctx.channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(args->get("service"));
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(*wait * 1000));
  while (true) {
    grpc::ClientContext context;
    set_timeout(&context, timeout->value_or(kDefaultRpcTimeout));
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status = stub->Check(&context, request, &response);
    const bool serving =
        status.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    if (serving || std::chrono::steady_clock::now() >= give_up) {
      if (!status.ok()) {
        print_rpc_error(status);
        return kExitRpcError;
      }
      std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())
                << "\n";
      return serving ? kExitOk : kExitRpcError;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace flashserve::cli
