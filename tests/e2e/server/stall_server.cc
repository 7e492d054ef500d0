// flashserve-stall-server: flashserve (server/server_main.h: the same flags, logs and life
// cycle) whose model runner is wrapped, by this test binary alone, in a decorator that blocks
// at the start of every forward pass while --fault-stall-file exists. The engine then makes
// no progress: health turns NOT_SERVING after --stall-timeout and new requests get
// UNAVAILABLE; removing the file lets the step finish and the server recover
// (soak_e2e_test.cc, StalledEngineIsNotServingThenRecovers). The production binary has no
// such flag: the fault lives in the test's own seam (CONTRIBUTING.md).
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "base/status_macros.h"
#include "model/runner.h"
#include "server/server_main.h"

ABSL_FLAG(std::string, fault_stall_file, "",
          "While this file exists every engine step blocks (empty = never)");

namespace flashserve::e2e {
namespace {

class StallingRunner final : public model::ModelRunner {
 public:
  StallingRunner(std::unique_ptr<model::ModelRunner> inner, std::string stall_file)
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
    while (!stall_file_.empty() && access(stall_file_.c_str(), F_OK) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::unique_ptr<model::ModelRunner> inner_;
  const std::string stall_file_;
};

absl::StatusOr<model::LoadedModel> load_stalling(const api::ServerOptions& options) {
  ASSIGN_OR_RETURN(model::LoadedModel model, server::load_model_file(options));
  model.runner = std::make_unique<StallingRunner>(std::move(model.runner),
                                                  absl::GetFlag(FLAGS_fault_stall_file));
  return model;
}

}  // namespace
}  // namespace flashserve::e2e

int main(int argc, char** argv) {
  return flashserve::server::run_server(
      argc, argv,
      {.name = "flashserve-stall-server",
       .usage = "--model PATH --fault-stall-file FILE [flashserve's flags]",
       .flags_file = __FILE__,
       .load_model = flashserve::e2e::load_stalling});
}
