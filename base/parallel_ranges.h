#pragma once
// One loop of independent iterations spread over the host's cores, for the load-time
// conversions of weights (ggml blocks to fp32 or bf16, and to the device's layout): an 8B
// model's ~7.5 billion elements took ~35 s of one core's time before a CUDA server could
// serve, and every core but one sat idle (bench/serving/NOTES.md, step 33).
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace flashserve {

// Calls fn(begin, end) on disjoint ranges that together cover [0, n), on up to
// std::thread::hardware_concurrency() threads (this one included), each range at least
// min_items long (so small loops stay on this thread); returns when every call has. fn must
// be safe to call concurrently on disjoint ranges.
template <typename Fn>
void parallel_ranges(int64_t n, int64_t min_items, Fn&& fn) {
  if (n <= 0) return;
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = std::clamp<int64_t>(n / std::max<int64_t>(min_items, 1), 1, cores);
  const int64_t per = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  for (int64_t begin = per; begin < n; begin += per) {
    pool.emplace_back([&fn, begin, end = std::min(n, begin + per)] { fn(begin, end); });
  }
  fn(int64_t{0}, std::min(n, per));
  for (std::thread& t : pool) t.join();
}

}  // namespace flashserve
