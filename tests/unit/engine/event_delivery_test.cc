// EventDelivery (server/engine/event_delivery.h): order, exactly once, off the posting
// thread, flush and destruction.
#include "server/engine/event_delivery.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace flashserve::engine {
namespace {

struct Log {
  std::mutex mu;
  std::vector<std::pair<int, int32_t>> seen;  // (sink, token)
  std::atomic<bool> off_thread{true};
};

EventDelivery::Batch batch(Log* log, std::thread::id poster, int first_token, int num_sinks) {
  EventDelivery::Batch b;
  for (int s = 0; s < num_sinks; ++s) {
    auto sink = std::make_shared<EventSink>([log, poster, s](GenerationEvent e) {
      if (std::this_thread::get_id() == poster) log->off_thread = false;
      std::lock_guard<std::mutex> lock(log->mu);
      log->seen.emplace_back(s, e.token_ids.at(0));
    });
    GenerationEvent e;
    e.token_ids = {first_token + s};
    b.emplace_back(std::move(sink), std::move(e));
  }
  return b;
}

TEST(EventDeliveryTest, DeliversEveryEventOnceInOrderOffThePostingThread) {
  Log log;
  {
    EventDelivery delivery;
    for (int step = 0; step < 100; ++step) {
      EventDelivery::Batch b = batch(&log, std::this_thread::get_id(), step * 10, 3);
      delivery.post(&b);
      EXPECT_TRUE(b.empty());
    }
    delivery.flush();
    std::lock_guard<std::mutex> lock(log.mu);
    ASSERT_EQ(log.seen.size(), 300u);  // flush: everything posted before it is out
    for (size_t i = 0; i < log.seen.size(); ++i) {
      EXPECT_EQ(log.seen[i].first, static_cast<int>(i % 3));
      EXPECT_EQ(log.seen[i].second, static_cast<int32_t>(i / 3 * 10 + i % 3));
    }
  }
  EXPECT_TRUE(log.off_thread);
}

TEST(EventDeliveryTest, DestructionDeliversWhatWasPosted) {
  Log log;
  {
    EventDelivery delivery;
    for (int step = 0; step < 50; ++step) {
      EventDelivery::Batch b = batch(&log, std::this_thread::get_id(), step, 1);
      delivery.post(&b);
    }
  }
  std::lock_guard<std::mutex> lock(log.mu);
  EXPECT_EQ(log.seen.size(), 50u);
}

// A delivered batch comes back to the poster empty with its capacity, so that a step's events
// do not grow a fresh vector every step (bench/serving/NOTES.md step 29).
TEST(EventDeliveryTest, PostHandsBackADeliveredBatchsCapacity) {
  Log log;
  EventDelivery delivery;
  EventDelivery::Batch b = batch(&log, std::this_thread::get_id(), 0, 64);
  delivery.post(&b);
  EXPECT_TRUE(b.empty());
  delivery.flush();  // the first batch is delivered and spare
  EventDelivery::Batch second = batch(&log, std::this_thread::get_id(), 100, 1);
  delivery.post(&second);
  EXPECT_TRUE(second.empty());
  EXPECT_GE(second.capacity(), 64u);
  delivery.flush();
  std::lock_guard<std::mutex> lock(log.mu);
  ASSERT_EQ(log.seen.size(), 65u);
  EXPECT_EQ(log.seen.back().second, 100);
}

TEST(EventDeliveryTest, FlushWithNothingPostedReturns) {
  EventDelivery delivery;
  delivery.flush();
  EventDelivery::Batch empty;
  delivery.post(&empty);
  delivery.flush();
}

}  // namespace
}  // namespace flashserve::engine
