// server/http/body_buffer.h: small bodies on the heap, large ones in a mapping of their own
// that grows without losing bytes and gives its pages back at release.
#include "server/http/body_buffer.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

namespace flashserve::http {
namespace {

// Resident bytes of this process (/proc/self/statm), -1 if unreadable.
int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long long pages = 0, resident = -1;
  const int n = std::fscanf(f, "%lld %lld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? resident * ::sysconf(_SC_PAGESIZE) : -1;
}

std::string pattern(size_t size, int seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + seed) % 251);
  return s;
}

TEST(BodyBufferTest, SmallBodiesStayOnTheHeap) {
  BodyBuffer b;
  ASSERT_TRUE(b.reserve(100));
  ASSERT_TRUE(b.append("{\"prompt\":", 10));
  ASSERT_TRUE(b.append("\"hi\"}", 5));
  EXPECT_EQ(b.view(), "{\"prompt\":\"hi\"}");
  EXPECT_EQ(b.size(), 15u);
  EXPECT_FALSE(b.mapped());
}

TEST(BodyBufferTest, ADeclaredLargeBodyIsMappedAndDoesNotMoveWhileItArrives) {
  constexpr size_t kSize = size_t{2} << 20;
  BodyBuffer b;
  ASSERT_TRUE(b.reserve(kSize));
  EXPECT_TRUE(b.mapped());
  EXPECT_EQ(b.size(), 0u);
  const std::string bytes = pattern(kSize, 7);
  ASSERT_TRUE(b.append(bytes.data(), 1000));
  const char* first = b.view().data();
  for (size_t at = 1000; at < kSize; at += 4096) {
    ASSERT_TRUE(b.append(bytes.data() + at, std::min<size_t>(4096, kSize - at)));
  }
  EXPECT_EQ(b.view().data(), first);
  EXPECT_EQ(b.view(), bytes);
}

// A chunked body has no declared size: it starts on the heap and moves into a mapping
// when it reaches BodyBuffer::kMapBytes, which then grows; no byte is lost on the way.
TEST(BodyBufferTest, AGrowingBodyMovesIntoAMappingAndKeepsEveryByte) {
  const std::string bytes = pattern(5 * (size_t{1} << 20) + 123, 3);
  BodyBuffer b;
  size_t at = 0;
  for (size_t piece = 1; at < bytes.size(); piece = piece * 2 % 70001 + 1) {
    const size_t n = std::min(piece, bytes.size() - at);
    ASSERT_TRUE(b.append(bytes.data() + at, n));
    at += n;
    EXPECT_EQ(b.mapped(), at >= BodyBuffer::kMapBytes) << at;
  }
  EXPECT_EQ(b.view(), bytes);
}

TEST(BodyBufferTest, ReleaseEmptiesAndTheBufferServesAgain) {
  BodyBuffer b;
  ASSERT_TRUE(b.reserve(size_t{1} << 20));
  ASSERT_TRUE(b.append("abc", 3));
  b.release();
  EXPECT_EQ(b.size(), 0u);
  EXPECT_FALSE(b.mapped());
  EXPECT_EQ(b.view(), "");
  ASSERT_TRUE(b.append("xyz", 3));
  EXPECT_EQ(b.view(), "xyz");
}

// The reason for the class: the pages of a large body leave the process at release, whatever
// malloc's state (a freed multi-MiB std::string may stay resident in glibc's arenas).
TEST(BodyBufferTest, ReleaseGivesTheBodysPagesBack) {
  constexpr size_t kSize = size_t{64} << 20;
  BodyBuffer b;
  ASSERT_TRUE(b.reserve(kSize));
  const int64_t before_fill = resident_bytes();
  const std::string chunk(size_t{1} << 20, 'b');
  for (size_t at = 0; at < kSize; at += chunk.size()) {
    ASSERT_TRUE(b.append(chunk.data(), chunk.size()));
  }
  const int64_t filled = resident_bytes();
  b.release();
  const int64_t released = resident_bytes();
  ASSERT_GE(before_fill, 0);
  // Touching the body made it resident; releasing it took (nearly) all of it away again.
  EXPECT_GE(filled - before_fill, int64_t{60} << 20);
  EXPECT_GE(filled - released, int64_t{60} << 20);
}

}  // namespace
}  // namespace flashserve::http
