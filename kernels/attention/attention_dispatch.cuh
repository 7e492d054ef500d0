#pragma once
// Explicit dispatch from the runtime (dtype, head_dim) of a launch to kernel template
// arguments. The supported set is listed here and nowhere else; anything outside it is an
// InvalidArgument naming the value.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/attention/attention.h"
#include "kernels/cuda_plumbing.cuh"

namespace flashserve::kernels::device {

template <int kHeadDim>
using HeadDimTag = std::integral_constant<int, kHeadDim>;

inline absl::Status check_head_dim(int head_dim) {
  if (head_dim == 64 || head_dim == 128) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("attention: unsupported head_dim ", head_dim, " (supported: 64, 128)"));
}

// Prefill and naive: a sliding window bounds the keys before a query, so it needs causal.
inline absl::Status check_window_is_causal(const AttentionParams& p, const char* launcher) {
  if (p.sliding_window > 0 && !p.causal) {
    return absl::InvalidArgumentError(absl::StrCat(
        launcher, ": sliding_window ", p.sliding_window, " needs causal attention"));
  }
  return absl::OkStatus();
}

// Calls f(TypeTag<T>{}, HeadDimTag<D>{}) for the listed combinations.
template <typename F>
absl::Status dispatch_dtype_head_dim(DType dtype, int head_dim, F&& f) {
  if (absl::Status s = check_head_dim(head_dim); !s.ok()) return s;
  return dispatch_dtype("attention", dtype, [&](auto type_tag) -> absl::Status {
    switch (head_dim) {
      case 64: return f(type_tag, HeadDimTag<64>{});
      case 128: return f(type_tag, HeadDimTag<128>{});
    }
    return check_head_dim(head_dim);
  });
}

}  // namespace flashserve::kernels::device
