#include "model/cuda/gemm.h"

#include <cublasLt.h>

#include <bit>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/cuda/cublas_check.h"

namespace flashserve::model::cuda {
struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  cublasLtMatmulAlgo_t algo;
  float beta = 0;
  ~Plan() {
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t l : {w, x, y}) {
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    }
  }
};

absl::StatusOr<std::unique_ptr<Gemm>> Gemm::create() {
  std::unique_ptr<Gemm> g(new Gemm());
  CUBLAS_CHECK(cublasLtCreate(&g->handle_));
  RETURN_IF_ERROR(g->workspace_.allocate(kWorkspaceBytes));
  return g;
}

Gemm::~Gemm() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

absl::StatusOr<const Gemm::Plan*> Gemm::plan(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  const int bucket = static_cast<int>(std::bit_ceil(static_cast<unsigned>(key.m)));
  const Plan* bucket_plan = nullptr;
  if (bucket != key.m) {
    ASSIGN_OR_RETURN(bucket_plan, plan(Key{bucket, key.n, key.k, key.out}));
  }
  auto p = std::make_unique<Plan>();
  const cudaDataType_t y_type = key.out == GemmOut::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  p->beta = key.out == GemmOut::kFp32Accumulate ? 1.f : 0.f;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
  // Column-major views: w is [k, n] (ld k), x is [k, m] (ld k), y is [n, m] (ld n).
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->w, CUDA_R_16BF, key.k, key.n, key.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->x, CUDA_R_16BF, key.k, key.m, key.k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->y, y_type, key.n, key.m, key.n));
  bool have_algo = false;
  if (bucket_plan != nullptr) {
    cublasLtMatmulHeuristicResult_t check;
    have_algo = cublasLtMatmulAlgoCheck(handle_, p->desc, p->w, p->x, p->y, p->y,
                                        &bucket_plan->algo, &check) == CUBLAS_STATUS_SUCCESS &&
                check.workspaceSize <= workspace_.bytes();
    if (have_algo) p->algo = bucket_plan->algo;
  }
  if (!have_algo) RETURN_IF_ERROR(query_algo(key, p.get()));
  const Plan* raw = p.get();
  plans_.emplace(key, std::move(p));
  return raw;
}

absl::Status Gemm::query_algo(const Key& key, Plan* p) {
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = workspace_.bytes();
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t result;
  int num_results = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->w, p->x, p->y, p->y, pref, 1,
                                        &result, &num_results);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  CUBLAS_CHECK(st);
  if (num_results == 0) {
    return absl::UnimplementedError(absl::StrCat("cublasLt: no algorithm for m ", key.m, " n ",
                                                 key.n, " k ", key.k));
  }
  p->algo = result.algo;
  return absl::OkStatus();
}

absl::Status Gemm::linear(const void* x, const void* w, void* y, int m, int n, int k,
                          GemmOut out, cudaStream_t stream) {
  if (m == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Plan* p, plan(Key{m, n, k, out}));
  const float alpha = 1.f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p->desc, &alpha, w, p->w, x, p->x, &p->beta,
                                           y, p->y, y, p->y, &p->algo, workspace_.get(),
                                           workspace_.bytes(), stream));
  return absl::OkStatus();
}

}  // namespace flashserve::model::cuda
