#include "tools/generate/generate.h"

#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/status_macros.h"

namespace flashserve::tools {

absl::StatusOr<GenerateResult> generate(std::unique_ptr<model::ModelRunner> runner,
                                        const model::Tokenizer& tokenizer,
                                        const GenerateOptions& options,
                                        std::function<void(std::string_view)> on_text) {
  engine::EngineOptions engine_options;
  engine_options.max_num_seqs = 1;
  engine_options.max_waiting = 1;
  engine_options.prefix_caching = false;  // one request: nothing to share
  engine::Engine engine(std::move(runner), tokenizer, engine_options, /*metrics=*/nullptr);

  engine::GenerationRequest request;
  request.prompt_tokens = options.prompt_tokens;
  request.max_new_tokens = options.max_new_tokens;
  request.sampling = options.sampling;

  absl::Mutex mu;
  GenerateResult result;
  absl::Status failure;
  absl::Notification done;
  auto sink = [&](engine::GenerationEvent e) {
    if (!e.text.empty() && on_text) on_text(e.text);
    absl::MutexLock lock(&mu);
    result.text += e.text;
    result.token_ids.insert(result.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
    if (!e.finished) return;
    result.finish_reason = e.finish_reason;
    result.timings = e.timings;
    failure = e.status;
    done.Notify();
  };
  RETURN_IF_ERROR(engine.submit(std::move(request), sink).status());
  engine.start();
  done.WaitForNotification();
  engine.drain();
  absl::MutexLock lock(&mu);
  RETURN_IF_ERROR(failure);
  return result;
}

}  // namespace flashserve::tools
