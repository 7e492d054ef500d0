// RETURN_IF_ERROR / ASSIGN_OR_RETURN: early return with the first error, the value
// otherwise, each expression evaluated exactly once, move-only values moved.
#include "base/status_macros.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace {

absl::StatusOr<int> parse_positive(int x, int* num_calls) {
  ++*num_calls;
  if (x <= 0) return absl::InvalidArgumentError("x = " + std::to_string(x) + " is not positive");
  return x;
}

absl::Status check(bool ok, int* num_calls) {
  ++*num_calls;
  return ok ? absl::OkStatus() : absl::DataLossError("check failed");
}

absl::StatusOr<int> sum_two(int a, int b, int* num_calls) {
  ASSIGN_OR_RETURN(const int x, parse_positive(a, num_calls));
  int y = 0;
  ASSIGN_OR_RETURN(y, parse_positive(b, num_calls));
  return x + y;
}

absl::Status checked_twice(bool first, bool second, int* num_calls) {
  RETURN_IF_ERROR(check(first, num_calls));
  RETURN_IF_ERROR(check(second, num_calls));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> make_box(int v) { return std::make_unique<int>(v); }

absl::StatusOr<int> unbox(int v) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> box, make_box(v));
  return *box;
}

TEST(StatusMacrosTest, AssignOrReturnGivesTheValueOrTheFirstError) {
  int num_calls = 0;
  absl::StatusOr<int> r = sum_two(2, 3, &num_calls);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 5);
  EXPECT_EQ(num_calls, 2);

  num_calls = 0;
  r = sum_two(-1, 3, &num_calls);
  EXPECT_EQ(r.status(), absl::InvalidArgumentError("x = -1 is not positive"));
  EXPECT_EQ(num_calls, 1);  // returned before the second call

  num_calls = 0;
  r = sum_two(1, 0, &num_calls);
  EXPECT_EQ(r.status().message(), "x = 0 is not positive");
  EXPECT_EQ(num_calls, 2);
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtTheFirstError) {
  int num_calls = 0;
  EXPECT_TRUE(checked_twice(true, true, &num_calls).ok());
  EXPECT_EQ(num_calls, 2);
  num_calls = 0;
  EXPECT_EQ(checked_twice(false, true, &num_calls).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(num_calls, 1);
  num_calls = 0;
  EXPECT_EQ(checked_twice(true, false, &num_calls).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(num_calls, 2);
}

TEST(StatusMacrosTest, MoveOnlyValuesAreMoved) {
  absl::StatusOr<int> r = unbox(7);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 7);
}

}  // namespace
