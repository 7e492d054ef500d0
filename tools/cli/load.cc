// `flashserve-cli load`: a closed-loop load generator. `--concurrency` streams (gRPC callback
// reactors on one channel) each run streaming generations back to back until `--requests`
// have been sent, then it prints
// throughput (requests/s, tokens/s) and TTFT / inter-token / end-to-end latency percentiles.
// Latencies are measured on the client (they include the network and the gRPC stack). It also
// prints the stream messages received (the server merges tokens into one message when a
// stream falls behind: docs/api.md) and the CPU time the client itself used, so that a run
// shows whether the client could have been the bottleneck.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "flashserve/v1/generation.grpc.pb.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "tools/cli/request_flags.h"

namespace flashserve::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kDefaultPrompt[] = "Write a short story about a robot who learns to paint.";
// Text repeated to build a prompt of exactly --prompt-tokens tokens.
constexpr char kFillerText[] =
    "The quick brown fox jumps over the lazy dog while the sun sets behind the hills. ";

struct RequestResult {
  grpc::StatusCode code = grpc::OK;
  std::string error;
  double ttft_seconds = -1;              // -1: no token arrived
  std::vector<double> inter_token;       // seconds between consecutive tokens
  double total_seconds = 0;
  int index = 0;                         // in the order the requests started
  double first_token_since_start = -1;   // from the run's start; -1: no token arrived
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int num_messages = 0;  // stream messages received (the final one included)
};

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// What every in-flight stream shares: the request, where results go, how many remain.
struct LoadRun {
  LoadRun(v1::Generation::Stub* s, const v1::GenerateRequest* r,
          std::optional<std::chrono::milliseconds> t, int n)
      : stub(s), request(r), timeout(t), num_requests(n) {}

  v1::Generation::Stub* const stub;
  const v1::GenerateRequest* const request;
  const std::optional<std::chrono::milliseconds> timeout;
  const int num_requests;
  const Clock::time_point run_start = Clock::now();  // the wall time's and the start-up's
  std::atomic<int> next{0};  // requests started so far
  std::mutex mu;
  std::condition_variable all_done;
  std::vector<RequestResult> results;  // guarded by mu; complete at num_requests

  // Starts the next request if any remain; returns false when none does.
  bool start_next();
};

// One streaming request as a gRPC callback reactor: no thread per stream, so a load of
// hundreds of streams costs no context switch per message (the thread-per-stream client spent
// half of its CPU time switching at 256 streams). Callbacks run on gRPC's threads; the times
// are taken when a message is handed to the client. Deletes itself when the call is done,
// after starting the next request of the closed loop.
class StreamRequest final : public grpc::ClientReadReactor<v1::GenerateStreamResponse> {
 public:
  StreamRequest(LoadRun* run, int index) : run_(run) {
    result_.index = index;
    if (run->timeout) context_.set_deadline(std::chrono::system_clock::now() + *run->timeout);
    start_ = Clock::now();
    run->stub->async()->GenerateStream(&context_, run->request, this);
    StartRead(&message_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended: OnDone follows
    record(Clock::now());
    StartRead(&message_);
  }

  void OnDone(const grpc::Status& status) override {
    result_.total_seconds = seconds_between(start_, Clock::now());
    result_.code = status.error_code();
    result_.error = status.error_message();
    // The next request first: once the last result is in, run_ may be gone.
    run_->start_next();
    {
      std::lock_guard<std::mutex> lock(run_->mu);
      run_->results.push_back(std::move(result_));
      if (static_cast<int>(run_->results.size()) == run_->num_requests) {
        run_->all_done.notify_all();
      }
    }
    delete this;
  }

 private:
  void record(Clock::time_point now) {
    ++result_.num_messages;
    const int num_tokens = message_.token_ids_size();
    if (num_tokens > 0) {
      if (result_.ttft_seconds < 0) {
        result_.ttft_seconds = seconds_between(start_, now);
        result_.first_token_since_start = seconds_between(run_->run_start, now);
        // Tokens that arrive together after the first one count as zero-gap pieces of it.
        for (int i = 1; i < num_tokens; ++i) result_.inter_token.push_back(0);
      } else {
        // A message carrying k tokens after a gap g: k tokens at g/k each.
        const double gap = seconds_between(last_token_, now) / num_tokens;
        for (int i = 0; i < num_tokens; ++i) result_.inter_token.push_back(gap);
      }
      last_token_ = now;
    }
    if (message_.has_final()) {
      result_.prompt_tokens = message_.final().usage().prompt_tokens();
      result_.completion_tokens = message_.final().usage().completion_tokens();
    }
  }

  LoadRun* const run_;
  grpc::ClientContext context_;
  v1::GenerateStreamResponse message_;
  RequestResult result_;
  Clock::time_point start_;
  Clock::time_point last_token_;
};

bool LoadRun::start_next() {
  const int index = next.fetch_add(1);
  if (index >= num_requests) return false;
  new StreamRequest(this, index);  // owns itself until OnDone
  return true;
}

// Nearest-rank percentile of an ascending vector; 0 when empty.
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

void print_percentiles(const char* name, std::vector<double> values) {
  std::sort(values.begin(), values.end());
  // Hundredths of a millisecond: served decode steps of native and bf16 weights differ by
  // ~0.1 ms (bench/serving/NOTES.md, step 23), which tenths hid.
  std::cout << absl::StrFormat("%-22s p50 %8.2f ms   p90 %8.2f ms   p99 %8.2f ms   (n=%d)\n",
                               name, 1e3 * percentile(values, 50), 1e3 * percentile(values, 90),
                               1e3 * percentile(values, 99), values.size());
}

// The first wave (the first_wave requests started before any finished): when its streams had
// all begun to stream, from the run's start. On a fast GPU a spread of a few hundred ms here
// is ~100 engine steps of a few streams (bench/gemm/NOTES.md, twenty-ninth session).
void print_start_up(const std::vector<RequestResult>& results, int first_wave) {
  std::vector<double> start_up;
  for (const RequestResult& r : results) {
    if (r.index < first_wave && r.first_token_since_start >= 0) {
      start_up.push_back(r.first_token_since_start);
    }
  }
  if (start_up.empty()) return;
  std::sort(start_up.begin(), start_up.end());
  std::cout << absl::StrFormat(
      "start-up: the first %d streams' first tokens %.2f ms (first) .. %.2f ms (median) .. "
      "%.2f ms (last) after the start\n",
      static_cast<int>(start_up.size()), 1e3 * start_up.front(), 1e3 * percentile(start_up, 50),
      1e3 * start_up.back());
}

// User + system CPU seconds this process has used so far.
double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + 1e-6 * t.tv_usec; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Builds the prompt: --prompt-tokens N -> exactly N token ids (the filler text tokenized by
// the server and repeated); else --prompt TEXT (or a default prompt).
absl::Status build_prompt(const CliContext& ctx, const Args& args,
                          v1::GenerateRequest* request) {
  ASSIGN_OR_RETURN(const std::optional<int> num_prompt_tokens,
                   args.get_optional_int("prompt-tokens"));
  if (!num_prompt_tokens) {
    request->set_prompt(args.get("prompt", kDefaultPrompt));
    return absl::OkStatus();
  }
  if (args.has("prompt")) {
    return absl::InvalidArgumentError("give --prompt or --prompt-tokens, not both");
  }
  if (*num_prompt_tokens < 1) return absl::InvalidArgumentError("--prompt-tokens must be >= 1");
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::TokenizeRequest tokenize;
  tokenize.set_text(kFillerText);
  v1::TokenizeResponse filler;
  grpc::Status status =
      v1::Generation::NewStub(ctx.channel)->Tokenize(&context, tokenize, &filler);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("tokenizing the filler prompt: ",
                                               status.error_message()));
  }
  if (filler.token_ids().empty()) return absl::InternalError("the filler prompt has no tokens");
  auto* ids = request->mutable_token_ids()->mutable_ids();
  for (int i = 0; i < *num_prompt_tokens; ++i) ids->Add(filler.token_ids(i % filler.token_ids_size()));
  return absl::OkStatus();
}

}  // namespace

int run_load(const CliContext& ctx, const std::vector<std::string>& argv) {
  FlagSpec spec{{"concurrency", "requests", "prompt", "prompt-tokens"}, {}};
  add_generation_flags(&spec);
  auto args = Args::parse(argv, spec);
  auto fail = [](const absl::Status& st) {
    std::cerr << "flashserve-cli load: " << st.message() << "\n";
    return kExitUsage;
  };
  if (!args.ok()) return fail(args.status());
  auto concurrency = args->get_int("concurrency", 8);
  auto num_requests = args->get_int("requests", 64);
  if (!concurrency.ok()) return fail(concurrency.status());
  if (!num_requests.ok()) return fail(num_requests.status());
  if (*concurrency < 1 || *concurrency > 4096 || *num_requests < 1) {
    return fail(absl::InvalidArgumentError(
        "--concurrency must be in [1, 4096] and --requests >= 1"));
  }
  v1::GenerateRequest request;
  if (!args->has("max-tokens")) request.mutable_stopping()->set_max_new_tokens(32);
  if (auto st = apply_generation_flags(*args, &request); !st.ok()) return fail(st);
  if (auto st = build_prompt(ctx, *args, &request); !st.ok()) return fail(st);
  auto timeout = timeout_flag(*args);
  if (!timeout.ok()) return fail(timeout.status());

  auto stub = v1::Generation::NewStub(ctx.channel);
  LoadRun run{stub.get(), &request, *timeout, *num_requests};
  run.results.reserve(*num_requests);
  const double cpu_start = process_cpu_seconds();
  for (int w = 0; w < std::min(*concurrency, *num_requests); ++w) run.start_next();
  {
    std::unique_lock<std::mutex> lock(run.mu);
    run.all_done.wait(lock, [&] { return static_cast<int>(run.results.size()) == run.num_requests; });
  }
  const double wall = seconds_between(run.run_start, Clock::now());
  const double cpu = process_cpu_seconds() - cpu_start;

  int num_ok = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0, num_messages = 0;
  std::map<std::string, int> errors;
  std::vector<double> ttft, itl, e2e;
  for (const RequestResult& r : run.results) {
    if (r.code != grpc::OK) {
      ++errors[absl::StrCat(status_code_name(r.code), ": ", r.error)];
      continue;
    }
    ++num_ok;
    prompt_tokens += r.prompt_tokens;
    completion_tokens += r.completion_tokens;
    num_messages += r.num_messages;
    if (r.ttft_seconds >= 0) ttft.push_back(r.ttft_seconds);
    itl.insert(itl.end(), r.inter_token.begin(), r.inter_token.end());
    e2e.push_back(r.total_seconds);
  }
  std::cout << absl::StrFormat(
      "target %s: %d requests, concurrency %d, %.2f s\n"
      "succeeded %d, failed %d\n"
      "throughput: %.2f req/s, %.1f generated tokens/s, %.1f prompt tokens/s\n"
      "tokens: %d prompt, %d generated (%.1f per request)\n",
      ctx.target, *num_requests, *concurrency, wall, num_ok, *num_requests - num_ok,
      num_ok / wall, completion_tokens / wall, prompt_tokens / wall, prompt_tokens,
      completion_tokens, num_ok ? static_cast<double>(completion_tokens) / num_ok : 0.0);
  std::cout << absl::StrFormat(
      "messages: %d stream messages, %.2f generated tokens per message\n"
      "client cpu: %.3f s (%.1f%% of one core), %.2f us per generated token\n",
      num_messages, num_messages ? static_cast<double>(completion_tokens) / num_messages : 0.0,
      cpu, 100 * cpu / wall, completion_tokens ? 1e6 * cpu / completion_tokens : 0.0);
  print_start_up(run.results, std::min(*concurrency, *num_requests));
  print_percentiles("time to first token", ttft);
  print_percentiles("inter-token latency", itl);
  print_percentiles("end-to-end latency", e2e);
  for (const auto& [error, count] : errors) std::cout << "error x" << count << ": " << error << "\n";
  return num_ok == *num_requests ? kExitOk : kExitRpcError;
}

}  // namespace flashserve::cli
