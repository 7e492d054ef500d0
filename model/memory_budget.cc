// resolve_kv_cache: the one KV-cache sizing rule of both backends (model/memory_budget.h).
#include "model/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flashserve::model {
namespace {

constexpr double kMiB = 1 << 20;

// Blocks and the name of the field that decided them; 0 blocks when nothing is requested.
struct Requested {
  int64_t blocks = 0;
  std::string source;
};

Requested requested_blocks(const KvCacheRequest& r, const KvCacheGeometry& g) {
  if (r.num_kv_blocks > 0) return {r.num_kv_blocks, absl::StrCat("num_kv_blocks ", r.num_kv_blocks)};
  if (r.kv_cache_tokens > 0) {
    // Overflow-safe ceil division: kv_cache_tokens may be anything up to INT64_MAX.
    const int64_t blocks = r.kv_cache_tokens / g.block_size + (r.kv_cache_tokens % g.block_size != 0);
    return {blocks, absl::StrCat("kv_cache_tokens ", r.kv_cache_tokens)};
  }
  if (r.kv_cache_mb > 0) {
    // Clamped to 2^40 MiB (an exbibyte, past any machine) so that the byte count fits int64.
    const int64_t mb = std::min<int64_t>(r.kv_cache_mb, int64_t{1} << 40);
    return {(mb << 20) / g.bytes_per_block, absl::StrCat("kv_cache_mb ", r.kv_cache_mb)};
  }
  return {};
}

}  // namespace

absl::StatusOr<KvCacheBudget> resolve_kv_cache(const KvCacheRequest& request,
                                               const KvCacheGeometry& g) {
  if (request.num_kv_blocks < 0 || request.kv_cache_tokens < 0 || request.kv_cache_mb < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV cache: num_kv_blocks ", request.num_kv_blocks, ", kv_cache_tokens ",
        request.kv_cache_tokens, " and kv_cache_mb ", request.kv_cache_mb, " must be >= 0"));
  }
  if (g.bytes_per_block <= 0 || g.block_size <= 0) {
    return absl::InternalError(absl::StrCat("KV cache: bytes_per_block ", g.bytes_per_block,
                                            " and block_size ", g.block_size, " must be > 0"));
  }
  const int64_t available_blocks = std::max<int64_t>(g.available_bytes, 0) / g.bytes_per_block;
  Requested want = requested_blocks(request, g);
  const bool explicit_size = want.blocks > 0;
  if (!explicit_size) {
    want.blocks = std::min(std::max<int64_t>(g.default_bytes, 0) / g.bytes_per_block, available_blocks);
    want.source = g.default_source;
  }
  if (explicit_size && (want.blocks > available_blocks || want.blocks > kMaxKvBlocks)) {
    // Computed in double: blocks * bytes_per_block can exceed int64 for absurd requests.
    return absl::ResourceExhaustedError(absl::StrFormat(
        "KV cache: %s asks for %d blocks (%.1f MiB) but %s has %.1f MiB available for the "
        "cache (at most %d blocks of %d tokens)",
        want.source, want.blocks, double(want.blocks) * g.bytes_per_block / kMiB,
        g.memory_name, std::max<int64_t>(g.available_bytes, 0) / kMiB,
        std::min(available_blocks, kMaxKvBlocks), g.block_size));
  }
  want.blocks = std::min(want.blocks, kMaxKvBlocks);
  if (want.blocks < g.min_blocks) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "KV cache: %s gives %d blocks (%.1f MiB of %.1f MiB available in %s), fewer than one "
        "block for each of the max_num_seqs %d sequences",
        want.source, want.blocks, double(want.blocks) * g.bytes_per_block / kMiB,
        std::max<int64_t>(g.available_bytes, 0) / kMiB, g.memory_name, g.min_blocks));
  }
  return KvCacheBudget{static_cast<int>(want.blocks), want.blocks * g.bytes_per_block,
                       std::move(want.source)};
}

absl::Status check_fits(std::string_view what, int64_t bytes, int64_t available_bytes,
                        std::string_view memory_name) {
  if (bytes <= available_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s takes %.1f MiB but %s has %.1f MiB available", what, double(bytes) / kMiB,
      memory_name, std::max<int64_t>(available_bytes, 0) / kMiB));
}

int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return int64_t{pages} * page_size;
}

int64_t host_available_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return host_memory_bytes();
  char line[256];
  int64_t kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    long long value = 0;
    if (std::sscanf(line, "MemAvailable: %lld kB", &value) == 1) {
      kib = value;
      break;
    }
  }
  std::fclose(f);
  return kib >= 0 ? kib * 1024 : host_memory_bytes();
}

}  // namespace flashserve::model
