// KernelTrace over CUPTI's activity API (kernels, copies, memsets) and its callback API
// (cudaStreamSynchronize entries).
#include "bench/serving/kernel_trace.h"

#include <cupti.h>
#include <nvtx3/nvToolsExt.h>
#include <cxxabi.h>

#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace flashserve::bench {
namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

// What the callbacks (CUPTI's threads and the caller's) collect.
struct Collected {
  std::mutex mu;
  std::vector<GpuActivity> activities;
  std::vector<uint64_t> syncs;
};
Collected& collected() {
  static Collected c;
  return c;
}

absl::Status cupti_status(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return absl::OkStatus();
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return absl::InternalError(
      absl::StrCat("kernel trace: ", what, " failed: ", text != nullptr ? text : "?"));
}

std::string demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return name;
  std::string out(d);
  std::free(d);
  return out;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_num_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer == nullptr ? 0 : kBufferBytes;
  *max_num_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<GpuActivity> got;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      // CUPTI marks a kernel whose timing it could not collect with zero timestamps.
      if (k->start == 0 || k->end < k->start) continue;
      got.push_back({demangle(k->name), true, k->start, k->end, k->streamId,
                     static_cast<uint32_t>(k->gridX * k->gridY * k->gridZ)});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      got.push_back({"memcpy", false, m->start, m->end, m->streamId, 0});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      got.push_back({"memset", false, m->start, m->end, m->streamId, 0});
    }
  }
  std::free(buffer);
  Collected& c = collected();
  std::lock_guard<std::mutex> lock(c.mu);
  c.activities.insert(c.activities.end(), got.begin(), got.end());
}

void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  if (id != CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020 &&
      id != CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000) {
    return;
  }
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (info->callbackSite != CUPTI_API_ENTER) return;
  uint64_t now = 0;
  cuptiGetTimestamp(&now);
  Collected& c = collected();
  std::lock_guard<std::mutex> lock(c.mu);
  c.syncs.push_back(now);
}

class CuptiTrace final : public KernelTrace {
 public:
  uint64_t now_ns() override {
    uint64_t now = 0;
    cuptiGetTimestamp(&now);
    return now;
  }

  absl::Status start() override {
    {
      Collected& c = collected();
      std::lock_guard<std::mutex> lock(c.mu);
      c.activities.clear();
      c.syncs.clear();
    }
    RETURN_IF_ERROR(
        cupti_status(cuptiSubscribe(&subscriber_, on_api, nullptr), "cuptiSubscribe"));
    for (const CUpti_CallbackId id : {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                                      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000}) {
      RETURN_IF_ERROR(cupti_status(
          cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, id),
          "cuptiEnableCallback"));
    }
    for (const CUpti_ActivityKind kind : kKinds) {
      RETURN_IF_ERROR(cupti_status(cuptiActivityEnable(kind), "cuptiActivityEnable"));
    }
    return absl::OkStatus();
  }

  absl::Status stop(std::vector<GpuActivity>* activities,
                    std::vector<uint64_t>* sync_enter_ns) override {
    for (const CUpti_ActivityKind kind : kKinds) {
      RETURN_IF_ERROR(cupti_status(cuptiActivityDisable(kind), "cuptiActivityDisable"));
    }
    RETURN_IF_ERROR(cupti_status(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                                 "cuptiActivityFlushAll"));
    RETURN_IF_ERROR(cupti_status(cuptiUnsubscribe(subscriber_), "cuptiUnsubscribe"));
    Collected& c = collected();
    std::lock_guard<std::mutex> lock(c.mu);
    *activities = std::move(c.activities);
    *sync_enter_ns = std::move(c.syncs);
    c.activities.clear();
    c.syncs.clear();
    return absl::OkStatus();
  }

 private:
  CUpti_SubscriberHandle subscriber_ = nullptr;
};

}  // namespace

void push_range(const char* name) { nvtxRangePushA(name); }
void pop_range() { nvtxRangePop(); }

absl::StatusOr<std::unique_ptr<KernelTrace>> KernelTrace::create() {
  static bool created = false;
  if (created) return absl::FailedPreconditionError("kernel trace: one per process");
  RETURN_IF_ERROR(cupti_status(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                               "cuptiActivityRegisterCallbacks"));
  created = true;
  return std::unique_ptr<KernelTrace>(new CuptiTrace());
}

}  // namespace flashserve::bench
