#include "server/engine/output_processor.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/engine_fakes.h"

namespace flashserve::engine {
namespace {

using namespace ::flashserve::engine::fakes;  // NOLINT: the fake vocabulary's ids

struct Fed {
  std::vector<std::string> pieces;  // text released per token
  std::string text;
  StopReason stop = StopReason::kNone;
  int num_tokens = 0;  // tokens fed until the stop
};

Fed feed(const std::vector<int32_t>& tokens, StopConditions stop) {
  FakeTokenizer tokenizer;
  OutputProcessor p(tokenizer, std::move(stop));
  Fed run;
  for (int32_t t : tokens) {
    OutputProcessor::Output o = p.append(t);
    ++run.num_tokens;
    run.pieces.push_back(o.text);
    run.text += o.text;
    run.stop = o.stop;
    if (o.stop != StopReason::kNone) break;
  }
  if (run.stop == StopReason::kNone) run.text += p.flush();
  return run;
}

TEST(OutputProcessorTest, LongestPartialStop) {
  EXPECT_EQ(longest_partial_stop("abc", {"cde"}), 1u);
  EXPECT_EQ(longest_partial_stop("abcd", {"cde", "bcdx"}), 3u);
  EXPECT_EQ(longest_partial_stop("abc", {"abc"}), 0u);  // a full match is not partial
  EXPECT_EQ(longest_partial_stop("", {"a"}), 0u);
  EXPECT_EQ(longest_partial_stop("xaa", {"aab"}), 2u);
}

TEST(OutputProcessorTest, StopsAtMaxNewTokens) {
  Fed r = feed({letter('a'), letter('b'), letter('c'), letter('d')}, {.max_new_tokens = 3});
  EXPECT_EQ(r.stop, StopReason::kLength);
  EXPECT_EQ(r.num_tokens, 3);
  EXPECT_EQ(r.text, "abc");
  EXPECT_EQ(r.pieces, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(OutputProcessorTest, EndOfGenerationStopsWithoutText) {
  Fed r = feed({letter('a'), kEndOfTurn, letter('b')}, {.max_new_tokens = 10});
  EXPECT_EQ(r.stop, StopReason::kStopToken);
  EXPECT_EQ(r.num_tokens, 2);
  EXPECT_EQ(r.text, "a");
  r = feed({letter('a'), kEos, letter('b')},
           {.max_new_tokens = 3, .stop_strings = {}, .stop_token_ids = {}, .ignore_eos = true});
  EXPECT_EQ(r.stop, StopReason::kLength);
  EXPECT_EQ(r.text, "ab");  // the control token has no text
}

TEST(OutputProcessorTest, StopTokenIdsStopWithoutTheirText) {
  Fed r = feed({letter('a'), letter('q'), letter('b')},
               {.max_new_tokens = 10, .stop_strings = {}, .stop_token_ids = {letter('q')}});
  EXPECT_EQ(r.stop, StopReason::kStopToken);
  EXPECT_EQ(r.text, "a");
}

TEST(OutputProcessorTest, StopStringSpanningTokensIsWithheldAndDropped) {
  // "ab" "ST" "OP" "cd": the stop string "STOP" spans two tokens.
  Fed r = feed({letter('a'), letter('b'), kSt, kOp, letter('c')},
               {.max_new_tokens = 10, .stop_strings = {"STOP"}});
  EXPECT_EQ(r.stop, StopReason::kStopSequence);
  EXPECT_EQ(r.num_tokens, 4);
  EXPECT_EQ(r.text, "ab");
  EXPECT_EQ(r.pieces, (std::vector<std::string>{"a", "b", "", ""}));
}

TEST(OutputProcessorTest, StopStringInsideOneTokenKeepsTheTextBefore) {
  Fed r = feed({letter('x'), kSt}, {.max_new_tokens = 10, .stop_strings = {"T"}});
  EXPECT_EQ(r.stop, StopReason::kStopSequence);
  EXPECT_EQ(r.text, "xS");
}

TEST(OutputProcessorTest, HeldTextIsReleasedWhenTheStopStringFails) {
  // "S" could start "STX"; "ST" still could; "STOP" cannot: "STOP" is released together,
  // never split as "S" + "TOP".
  Fed r = feed({letter('a'), kSt, kOp, letter('z')},
               {.max_new_tokens = 4, .stop_strings = {"STX", "Sz"}});
  EXPECT_EQ(r.stop, StopReason::kLength);
  EXPECT_EQ(r.pieces, (std::vector<std::string>{"a", "", "STOP", "z"}));
}

TEST(OutputProcessorTest, HeldTextIsReleasedAtLengthAndOnFlush) {
  Fed r = feed({letter('a'), kSt}, {.max_new_tokens = 2, .stop_strings = {"STOP"}});
  EXPECT_EQ(r.stop, StopReason::kLength);
  EXPECT_EQ(r.pieces.back(), "ST");

  FakeTokenizer tokenizer;
  OutputProcessor p(tokenizer, {.max_new_tokens = 5, .stop_strings = {"STOP"}});
  EXPECT_EQ(p.append(kSt).text, "");
  EXPECT_EQ(p.flush(), "ST");  // cancelled: the held text was never a stop string
}

TEST(OutputProcessorTest, EarliestOfSeveralStopStringsWins) {
  Fed r = feed({letter('a'), letter('b'), letter('c'), letter('d')},
               {.max_new_tokens = 10, .stop_strings = {"cd", "bc"}});
  EXPECT_EQ(r.stop, StopReason::kStopSequence);
  EXPECT_EQ(r.text, "a");
}

TEST(OutputProcessorTest, MultiByteCharactersAreNeverSplit) {
  Fed r = feed({letter('a'), kEAcuteLead, kEAcuteTail, kEuroLead, kEuroTail},
               {.max_new_tokens = 5});
  EXPECT_EQ(r.pieces, (std::vector<std::string>{"a", "", "\xC3\xA9", "", "\xE2\x82\xAC"}));
  // A stop string made of a multi-byte character.
  r = feed({letter('a'), kEAcuteLead, kEAcuteTail, letter('b')},
           {.max_new_tokens = 5, .stop_strings = {"\xC3\xA9"}});
  EXPECT_EQ(r.stop, StopReason::kStopSequence);
  EXPECT_EQ(r.text, "a");
}

TEST(OutputProcessorTest, CutOffCharacterAtLengthBecomesReplacementCharacter) {
  Fed r = feed({letter('a'), kEuroLead}, {.max_new_tokens = 2});
  EXPECT_EQ(r.stop, StopReason::kLength);
  EXPECT_EQ(r.text, "a\xEF\xBF\xBD");  // U+FFFD, valid UTF-8
}

}  // namespace
}  // namespace flashserve::engine
