#include "model/cuda/l2_residency.h"

#include <algorithm>
#include <vector>

#include "kernels/cuda_check.h"

namespace flashserve::model::cuda {
namespace {

cudaAccessPolicyWindow window_of(const L2Window& w) {
  cudaAccessPolicyWindow a{};
  a.base_ptr = w.base;
  a.num_bytes = w.bytes;
  a.hitRatio = w.hit_ratio;
  a.hitProp = cudaAccessPropertyPersisting;
  a.missProp = cudaAccessPropertyStreaming;
  return a;
}

}  // namespace

L2Window plan_l2_window(void* base, size_t bytes, int device) {
  L2Window w;
  int max_window = 0, max_persisting = 0;
  if (base == nullptr || bytes == 0 ||
      cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&max_persisting, cudaDevAttrMaxPersistingL2CacheSize, device) !=
          cudaSuccess ||
      max_window <= 0 || max_persisting <= 0) {
    cudaGetLastError();
    return w;
  }
  w.base = base;
  w.bytes = std::min({bytes, static_cast<size_t>(max_window), static_cast<size_t>(max_persisting)});
  w.set_aside = w.bytes;
  w.hit_ratio = 1.0f;
  return w;
}

absl::Status apply_l2_window(const L2Window& w, cudaStream_t stream, cudaStream_t side_stream) {
  if (w.bytes == 0) return absl::OkStatus();
  CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, w.set_aside));
  cudaStreamAttrValue v{};
  v.accessPolicyWindow = window_of(w);
  for (cudaStream_t s : {stream, side_stream}) {
    CUDA_CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
  }
  return absl::OkStatus();
}

absl::Status apply_l2_window(const L2Window& w, cudaGraph_t graph) {
  if (w.bytes == 0) return absl::OkStatus();
  size_t count = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  cudaKernelNodeAttrValue v{};
  v.accessPolicyWindow = window_of(w);
  // Best effort: a node that refuses the attribute keeps what capture gave it (the stream's
  // window), so a refusal costs residency, never the graph.
  for (cudaGraphNode_t n : nodes) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(n, &type) != cudaSuccess || type != cudaGraphNodeTypeKernel ||
        cudaGraphKernelNodeSetAttribute(n, cudaKernelNodeAttributeAccessPolicyWindow, &v) !=
            cudaSuccess) {
      cudaGetLastError();
    }
  }
  return absl::OkStatus();
}

void release_l2_window(const L2Window& w) {
  if (w.bytes == 0) return;
  cudaCtxResetPersistingL2Cache();
  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
  cudaGetLastError();
}

}  // namespace flashserve::model::cuda
