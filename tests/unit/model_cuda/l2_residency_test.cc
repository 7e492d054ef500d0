// The L2 window over the native GEMMs' scratch (model/cuda/l2_residency.h): its plan on this
// device, and a runner that sets the persisting set-aside while it lives and returns it when
// it goes. GPU tests: skipped (reported as skipped) without a GPU, a model file or L2
// residency control.
#include "model/cuda/l2_residency.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "kernels/device.h"
#include "model/model_loader.h"

namespace flashserve::model::cuda {
namespace {

std::string model_path() {
  const char* env = std::getenv("FLASHSERVE_TEST_MODEL");
  return env != nullptr ? env
                        : std::string(FLASHSERVE_SOURCE_DIR) +
                              "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

int max_persisting_bytes() {
  int device = 0, bytes = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxPersistingL2CacheSize, device) != cudaSuccess) {
    return 0;
  }
  return bytes;
}

size_t persisting_limit() {
  size_t bytes = 0;
  EXPECT_EQ(cudaDeviceGetLimit(&bytes, cudaLimitPersistingL2CacheSize), cudaSuccess);
  return bytes;
}

class L2ResidencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    max_ = max_persisting_bytes();
    if (max_ <= 0) GTEST_SKIP() << "no L2 residency control on this device";
  }
  int max_ = 0;
};

TEST_F(L2ResidencyTest, PlanKeepsTheHeadUpToTheDevicesSetAside) {
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  char buffer[1];
  const L2Window big = plan_l2_window(buffer, size_t{1} << 32, device);
  EXPECT_EQ(big.base, buffer);
  EXPECT_EQ(big.bytes, static_cast<size_t>(max_));
  EXPECT_EQ(big.set_aside, big.bytes);
  EXPECT_EQ(big.hit_ratio, 1.0f);
  const L2Window small = plan_l2_window(buffer, 4096, device);
  EXPECT_EQ(small.bytes, 4096u);
  EXPECT_EQ(plan_l2_window(buffer, 0, device).bytes, 0u);
  EXPECT_EQ(plan_l2_window(nullptr, 4096, device).bytes, 0u);
}

// A native runner has a scratch (its grouped copies and split-k partials): the set-aside is
// on while it lives and back to none once it is gone. bf16 weights have no scratch, no window.
TEST_F(L2ResidencyTest, NativeRunnerSetsTheSetAsideAndReturnsIt) {
  if (!std::filesystem::exists(model_path())) GTEST_SKIP() << "no model file";
  LoadOptions o;
  o.device = Device::kCuda;
  o.kv_cache_tokens = 64 * 64;
  o.max_num_seqs = 256;
  o.cuda_graphs = true;
  o.weights = Weights::kNative;
  {
    auto native = load_model(model_path(), o);
    ASSERT_TRUE(native.ok()) << native.status();
    EXPECT_GT(persisting_limit(), 0u);
    EXPECT_LE(persisting_limit(), static_cast<size_t>(max_));
    EXPECT_NE(native->backend_summary.find("L2 window"), std::string::npos)
        << native->backend_summary;
  }
  EXPECT_EQ(persisting_limit(), 0u);
  o.weights = Weights::kBf16;
  auto bf16 = load_model(model_path(), o);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(persisting_limit(), 0u);
}

}  // namespace
}  // namespace flashserve::model::cuda
