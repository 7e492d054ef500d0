#include "server/api/stall_hook.h"

#include <unistd.h>

#include <chrono>
#include <thread>

namespace flashserve::api {
namespace {

class StallHookRunner final : public model::ModelRunner {
 public:
  StallHookRunner(std::unique_ptr<model::ModelRunner> inner, std::string stall_file)
      : inner_(std::move(inner)), stall_file_(std::move(stall_file)) {}

  const model::ModelConfig& config() const override { return inner_->config(); }
  int num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  int kv_block_size() const override { return inner_->kv_block_size(); }
  absl::Status forward(const model::ForwardBatch& batch,
                       std::vector<model::SampledToken>* sampled,
                       model::ForwardStats* stats) override {
    wait_while_stalled();
    return inner_->forward(batch, sampled, stats);
  }

 private:
  void wait_while_stalled() const {
    while (access(stall_file_.c_str(), F_OK) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::unique_ptr<model::ModelRunner> inner_;
  const std::string stall_file_;
};

}  // namespace

std::unique_ptr<model::ModelRunner> with_stall_hook(std::unique_ptr<model::ModelRunner> runner,
                                                    std::string stall_file) {
  return std::make_unique<StallHookRunner>(std::move(runner), std::move(stall_file));
}

}  // namespace flashserve::api
