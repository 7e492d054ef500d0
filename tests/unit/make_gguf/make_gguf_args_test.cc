// Hostile input to flashserve-make-gguf: bad flags and bad --tokenizer-from files give
// InvalidArgument naming the flag or file and the problem, leave no file behind, and the
// tool exits with status 2 (flags) or 1 (files) and the message on stderr.
#include "tools/make_gguf/make_gguf_args.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "make_gguf_test_util.h"
#include "model/gguf/gguf_writer.h"
#include "tests/support/run_tool.h"
#include "tools/make_gguf/random_llama.h"

namespace flashserve::tools {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> with_required(std::vector<std::string> args) {
  args.insert(args.end(), {"--tokenizer-from", "tok.gguf", "--out", "out.gguf"});
  return args;
}

TEST(MakeGgufArgsTest, PresetThenOverridesInAnyOrder) {
  absl::StatusOr<MakeGgufArgs> a =
      parse_make_gguf_args(with_required({"--layers", "4", "--preset", "llama-3.1-8b", "--type", "bf16", "--seed", "9"}));
  ASSERT_TRUE(a.ok()) << a.status();
  const LlamaShape& s = a->options.shape;
  EXPECT_EQ(s.num_layers, 4);
  EXPECT_EQ(s.hidden_size, 4096);
  EXPECT_EQ(s.num_heads, 32);
  EXPECT_EQ(s.num_kv_heads, 8);
  EXPECT_EQ(s.ffn_size, 14336);
  EXPECT_FALSE(s.tied_embeddings);
  EXPECT_FLOAT_EQ(s.rope_theta, 500000.f);
  EXPECT_EQ(a->options.weight_type, model::GgmlType::kBF16);
  EXPECT_EQ(a->options.seed, 9u);
  EXPECT_EQ(a->options.name, "flashserve-random-llama-3.1-8b-bf16");

  a = parse_make_gguf_args(with_required({}));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->options.shape.num_layers, 30);  // smollm2-135m by default
  EXPECT_EQ(a->options.shape.hidden_size, 576);
  EXPECT_EQ(a->options.weight_type, model::GgmlType::kQ4_1);

  a = parse_make_gguf_args({"--help"});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->help);
  EXPECT_THAT(make_gguf_usage(), HasSubstr("llama-3.2-1b"));
}

TEST(MakeGgufArgsTest, BadFlagsNameTheFlagAndValue) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--bogus", "1"}, "unknown flag '--bogus'"},
      {{"--layers", "0"}, "bad value '0' for --layers"},
      {{"--layers", "abc"}, "bad value 'abc' for --layers"},
      {{"--hidden", "99999999999"}, "bad value '99999999999' for --hidden"},
      {{"--rope-theta", "-1"}, "bad value '-1' for --rope-theta"},
      {{"--rope-theta", "nan"}, "bad value 'nan' for --rope-theta"},
      {{"--seed", "-3"}, "bad value '-3' for --seed"},
      {{"--threads", "100000"}, "bad value '100000' for --threads"},
      {{"--tied-embeddings", "yes"}, "bad value 'yes' for --tied-embeddings"},
      {{"--type", "q7_K"},
       "bad value 'q7_K' for --type: expected q4_1, q4_0, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, "
       "iq4_xs, f16, bf16, f32"},
      {{"--ftype", "q4_k_l"}, "bad value 'q4_k_l' for --ftype: expected q4_k_m, q5_k_m, q6_k, q8_0"},
      {{"--ftype", "q4_k_m", "--type", "q4_K"}, "--type and --ftype exclude each other"},
      {{"--preset", "gpt-5"}, "--preset 'gpt-5' is not one of smollm2-135m, llama-3.2-1b, llama-3.1-8b"},
      {{"--heads", "9", "--kv-heads", "4"}, "--heads 9 is not a multiple of --kv-heads 4"},
      {{"--hidden", "100"}, "--hidden 100 / --heads 9 must give an even whole head_dim"},
      {{"--hidden", "144", "--heads", "3", "--kv-heads", "1"},
       "--type q4_1 stores rows in blocks of 32 values: --hidden 144 is not a multiple of 32"},
      {{"--ffn", "100", "--type", "q8_0"}, "--ffn 100 is not a multiple of 32"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<MakeGgufArgs> a = parse_make_gguf_args(with_required(c.args));
    ASSERT_FALSE(a.ok()) << c.message;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(c.message));
  }
  EXPECT_THAT(std::string(parse_make_gguf_args({"--out", "x", "--layers"}).status().message()),
              HasSubstr("missing value after --layers"));
  // The same odd hidden size is fine for f16, which has no blocks.
  EXPECT_TRUE(parse_make_gguf_args(with_required({"--hidden", "144", "--heads", "3", "--kv-heads", "1",
                                                  "--type", "f16"})).ok());
  EXPECT_THAT(std::string(parse_make_gguf_args({"--out", "x"}).status().message()),
              HasSubstr("--tokenizer-from GGUF is required"));
  EXPECT_THAT(std::string(parse_make_gguf_args({"--tokenizer-from", "x"}).status().message()),
              HasSubstr("--out PATH is required"));
}

// Each bad source is rejected with a message naming the flag, the path and the problem, and
// neither the output nor its .part file is left behind.
TEST(MakeGgufArgsTest, BadTokenizerSourcesAreClearErrors) {
  const std::string missing = temp_path("no_such_file.gguf");
  const std::string garbage = temp_path("garbage.gguf");
  std::ofstream(garbage) << "this is not a GGUF file at all";
  const std::string no_tokenizer = temp_path("no_tokenizer.gguf");
  ASSERT_TRUE(model::GgufWriter().add("general.architecture", model::gguf_string("llama")).write_file(no_tokenizer).ok());
  const std::string bad_tokenizer = temp_path("bad_tokenizer.gguf");
  ASSERT_TRUE(model::GgufWriter()
                  .add("tokenizer.ggml.model", model::gguf_string("wordpiece"))
                  .add("tokenizer.ggml.tokens", model::gguf_string_array({"a", "b"}))
                  .write_file(bad_tokenizer)
                  .ok());
  const std::string synthetic = write_synthetic_tokenizer("truncation_source.gguf");
  std::string bytes;
  {
    std::ifstream in(synthetic, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string truncated = temp_path("truncated.gguf");
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);

  const std::pair<std::string, std::string> cases[] = {
      {missing, "No such file"}, {garbage, ""}, {no_tokenizer, "'tokenizer.ggml.tokens' is absent"},
      {bad_tokenizer, "wordpiece"}, {truncated, ""}};
  const std::string out = temp_path("never_written.gguf");
  std::filesystem::remove(out);
  for (const auto& [path, problem] : cases) {
    RandomLlamaOptions o;
    o.tokenizer_from = path;
    o.out = out;
    o.shape = *llama_preset("smollm2-135m");
    o.shape.num_layers = 1;
    absl::StatusOr<RandomLlamaSummary> s = write_random_llama(o);
    ASSERT_FALSE(s.ok()) << path;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("--tokenizer-from " + path + ": ")) << s.status();
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(problem)) << s.status();
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_FALSE(std::filesystem::exists(out + ".part"));
  }
}

TEST(MakeGgufArgsTest, UnwritableOutputNamesThePath) {
  RandomLlamaOptions o;
  o.tokenizer_from = write_synthetic_tokenizer("unwritable_source.gguf");
  o.out = temp_path("no_such_dir/model.gguf");
  o.shape = {1, 64, 4, 2, 128, 512, 10000.f, 1e-5f, true};
  absl::StatusOr<RandomLlamaSummary> s = write_random_llama(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("cannot create '" + o.out + ".part'"));
}

// The tool itself: exit status and the message on stderr (no crash, no file).
int run_tool(const std::string& args, std::string* output) {
  return flashserve::testing::run_built_tool("flashserve-make-gguf", args, output);
}

TEST(MakeGgufToolTest, ExitStatusAndMessages) {
  std::string output;
  EXPECT_EQ(run_tool("--help", &output), 0);
  EXPECT_THAT(output, HasSubstr("usage: flashserve-make-gguf"));
  output.clear();
  EXPECT_EQ(run_tool("--tokenizer-from x --out y --kv-heads 5", &output), 2);
  EXPECT_THAT(output, HasSubstr("flashserve-make-gguf: --heads 9 is not a multiple of --kv-heads 5"));
  output.clear();
  const std::string out = temp_path("tool_out.gguf");
  std::filesystem::remove(out);
  EXPECT_EQ(run_tool("--tokenizer-from " + temp_path("absent.gguf") + " --out " + out, &output), 1);
  EXPECT_THAT(output, HasSubstr("flashserve-make-gguf: --tokenizer-from " + temp_path("absent.gguf")));
  EXPECT_FALSE(std::filesystem::exists(out));
  output.clear();
  const std::string source = write_synthetic_tokenizer("tool_source.gguf");
  EXPECT_EQ(run_tool("--tokenizer-from " + source + " --out " + out + " --layers 1 --hidden 64 --heads 2 "
                     "--kv-heads 1 --ffn 64 --type q8_0", &output), 0) << output;
  EXPECT_THAT(output, HasSubstr("wrote " + out));
  EXPECT_TRUE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace flashserve::tools
