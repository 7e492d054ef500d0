#pragma once
// The KV cache's size, resolved once per backend by one function: the CPU backend (fp32
// cache in host memory) and the CUDA backend (bf16 cache on the device) differ only in the
// bytes a block takes, the bytes that are available and what the default is.
//
// The request comes from the user (model::LoadOptions); the first field that is set wins:
// num_kv_blocks, kv_cache_tokens (rounded up to whole blocks), kv_cache_mb (MiB for the K
// and V of all layers, in the backend's own cache dtype). With none set the backend's
// default applies (a fixed MiB on the CPU; what gpu_memory_fraction leaves on the GPU).
// Messages name the option fields (`kv_cache_mb`), never command-line flags: the binaries
// map fields to their own flags.
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace flashserve::model {

// More blocks than this are never allocated (block ids are int32 with room to spare).
inline constexpr int64_t kMaxKvBlocks = int64_t{1} << 30;

struct KvCacheRequest {
  int64_t num_kv_blocks = 0;    // > 0: exactly this many blocks
  int64_t kv_cache_tokens = 0;  // > 0: enough blocks for this many tokens
  int64_t kv_cache_mb = 0;      // > 0: this many MiB of cache
};

// What a backend knows about its cache and its memory.
struct KvCacheGeometry {
  int64_t bytes_per_block = 0;   // K and V of every layer for one block
  int block_size = 0;            // tokens per block
  // Bytes the cache may take at most: what the machine or device has left after the
  // weights and the workspace. A request past it is refused (never attempted).
  int64_t available_bytes = 0;
  // Bytes the default takes when nothing is requested (<= available_bytes is not required:
  // the default is clamped to what is available), and how the log names it.
  int64_t default_bytes = 0;
  std::string default_source;    // e.g. "default 512 MiB", "gpu_memory_fraction 0.90"
  std::string memory_name;       // e.g. "host memory", "NVIDIA H200 memory"
  int min_blocks = 1;            // one block per sequence of a full batch
};

struct KvCacheBudget {
  int num_blocks = 0;
  int64_t bytes = 0;
  std::string source;  // what decided the size, for the start-up log ("kv_cache_mb 512")
};

// Resolves the request against the geometry. InvalidArgument naming the field for a
// negative request; ResourceExhausted naming the field, the bytes asked and the bytes
// available when the request does not fit or the result holds fewer than min_blocks.
absl::StatusOr<KvCacheBudget> resolve_kv_cache(const KvCacheRequest& request,
                                               const KvCacheGeometry& geometry);

// Refuses a fixed allocation that does not fit: OK when `bytes` <= `available_bytes`, else
// ResourceExhausted "<what> takes X MiB but <memory_name> has Y MiB available". `what`
// starts with the option field when one decides the size ("max_batch_tokens 2048: the step
// workspace"), so that the binaries can name their flag. Nothing is allocated.
absl::Status check_fits(std::string_view what, int64_t bytes, int64_t available_bytes,
                        std::string_view memory_name);

// Bytes of physical memory of this machine (0 when it cannot be read).
int64_t host_memory_bytes();
// Bytes of memory the kernel reports as available to new allocations (MemAvailable), or
// host_memory_bytes() when that cannot be read.
int64_t host_available_bytes();

}  // namespace flashserve::model
