// flashserve-make-gguf's quantized files through gguf-py: tests/data/gguf_quant_roundtrip.txt
// (tools/golden/gguf_quants_golden.py roundtrip, see tests/data/README.md) lists argument
// sets (every --type we write, the --ftype mixtures, shapes whose rows need the fallback)
// and, for every tensor of the file our tool made with them, its type, dims, a hash of its
// bytes and a hash of gguf.quants' decoding. This test makes the same files: identical
// types and bytes (our quantizer is deterministic), and our decoding of every tensor
// hashes the same as gguf-py's, bit for bit. It also checks the mixtures' layouts against
// the rules of llama.cpp's llama-quant.cpp written out by hand.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "make_gguf_test_util.h"
#include "model/gguf/gguf.h"
#include "model/model_loader.h"
#include "tools/make_gguf/make_gguf_args.h"
#include "tools/make_gguf/random_llama.h"
#include "tools/make_gguf/tensor_types.h"

namespace flashserve::tools {
namespace {

using model::GgmlType;

constexpr char kGoldenPath[] = FLASHSERVE_SOURCE_DIR "/tests/data/gguf_quant_roundtrip.txt";

struct GoldenTensor {
  std::string name, type;
  std::vector<int64_t> dims;
  uint64_t raw_hash = 0, values_hash = 0;
};

struct GoldenFile {
  std::vector<std::string> args;
  std::vector<GoldenTensor> tensors;
};

uint64_t fnv1a64(const void* data, size_t size) {
  uint64_t h = 0xCBF29CE484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

std::map<int, GoldenFile> read_golden() {
  std::ifstream in(kGoldenPath);
  EXPECT_TRUE(in.good()) << kGoldenPath;
  std::map<int, GoldenFile> files;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string kind;
    int id = -1;
    fields >> kind >> id;
    if (kind == "file") {
      std::string arg;
      while (fields >> arg) files[id].args.push_back(arg);
    } else if (kind == "tensor") {
      GoldenTensor t;
      int num_dims = 0;
      fields >> t.name >> t.type >> num_dims;
      t.dims.resize(num_dims);
      for (int64_t& d : t.dims) fields >> d;
      fields >> std::hex >> t.raw_hash >> t.values_hash;
      files[id].tensors.push_back(t);
    } else {
      ADD_FAILURE() << "unknown record: " << line;
    }
  }
  return files;
}

TEST(QuantRoundTripTest, OurFilesDecodeBitForBitAsGgufPyDecodesThem) {
  const std::string tokenizer = write_synthetic_tokenizer("roundtrip_tokenizer.gguf");
  const std::map<int, GoldenFile> golden = read_golden();
  ASSERT_EQ(golden.size(), 19u);
  for (const auto& [id, g] : golden) {
    SCOPED_TRACE(::testing::Message() << "file " << id << ": " << absl::StrJoin(g.args, " "));
    std::vector<std::string> args = g.args;
    const std::string path = temp_path("roundtrip.gguf");
    args.insert(args.end(), {"--tokenizer-from", tokenizer, "--out", path, "--threads", "2"});
    absl::StatusOr<MakeGgufArgs> parsed = parse_make_gguf_args(args);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    ASSERT_TRUE(write_random_llama(parsed->options).ok());
    absl::StatusOr<std::unique_ptr<model::GgufFile>> file = model::GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE(model::check_tensor_types(**file).ok());
    const std::vector<model::GgufTensorInfo>& tensors = (*file)->tensors();
    ASSERT_EQ(tensors.size(), g.tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const model::GgufTensorInfo& t = tensors[i];
      const GoldenTensor& want = g.tensors[i];
      SCOPED_TRACE(t.name);
      ASSERT_EQ(t.name, want.name);
      ASSERT_EQ(model::ggml_type_name(t.type), want.type);
      ASSERT_EQ(t.dims, want.dims);
      EXPECT_EQ(fnv1a64(t.data, t.num_bytes), want.raw_hash)
          << "our quantizer wrote other bytes than when the golden was made: if intended, regenerate it";
      absl::StatusOr<std::vector<float>> values = (*file)->dequantize(t);
      ASSERT_TRUE(values.ok()) << values.status();
      EXPECT_EQ(fnv1a64(values->data(), values->size() * sizeof(float)), want.values_hash)
          << "our decoding differs from gguf-py's";
    }
  }
}

// The layouts by hand from llama.cpp's rules (tools/make_gguf/tensor_types.h).
TEST(QuantMixTest, Q4KMOfASixteenLayerModelMatchesLlamaCppsRules) {
  const int kLayers = 16;  // Llama-3.2-1B
  auto type_of = [&](QuantMix mix, const std::string& name, int64_t row, bool tied = true) {
    absl::StatusOr<GgmlType> t = weight_tensor_type(mix, GgmlType::kF32, name, row, kLayers, tied);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.value_or(GgmlType::kF32);
  };
  const std::vector<int> more_bits = {0, 1, 4, 7, 10, 13, 14, 15};
  for (int layer = 0; layer < kLayers; ++layer) {
    const bool more = std::find(more_bits.begin(), more_bits.end(), layer) != more_bits.end();
    const std::string p = "blk." + std::to_string(layer) + ".";
    EXPECT_EQ(type_of(QuantMix::kQ4_K_M, p + "attn_v.weight", 2048), more ? GgmlType::kQ6_K : GgmlType::kQ4_K) << layer;
    EXPECT_EQ(type_of(QuantMix::kQ4_K_M, p + "ffn_down.weight", 8192), more ? GgmlType::kQ6_K : GgmlType::kQ4_K);
    EXPECT_EQ(type_of(QuantMix::kQ5_K_M, p + "ffn_down.weight", 8192), more ? GgmlType::kQ6_K : GgmlType::kQ5_K);
    for (const char* other : {"attn_q.weight", "attn_k.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight"}) {
      EXPECT_EQ(type_of(QuantMix::kQ4_K_M, p + other, 2048), GgmlType::kQ4_K) << other;
      EXPECT_EQ(type_of(QuantMix::kQ6_K, p + other, 2048), GgmlType::kQ6_K) << other;
      EXPECT_EQ(type_of(QuantMix::kQ8_0, p + other, 2048), GgmlType::kQ8_0) << other;
    }
  }
  EXPECT_EQ(type_of(QuantMix::kQ4_K_M, "token_embd.weight", 2048), GgmlType::kQ6_K);  // tied: the LM head
  EXPECT_EQ(type_of(QuantMix::kQ4_K_M, "token_embd.weight", 2048, false), GgmlType::kQ4_K);
  EXPECT_EQ(type_of(QuantMix::kQ4_K_M, "output.weight", 2048, false), GgmlType::kQ6_K);
  EXPECT_EQ(type_of(QuantMix::kQ8_0, "output.weight", 2048, false), GgmlType::kQ8_0);
  // SmolLM2-135M's 576-wide rows: no whole super-blocks.
  EXPECT_EQ(type_of(QuantMix::kQ4_K_M, "token_embd.weight", 576), GgmlType::kQ8_0);
  EXPECT_EQ(type_of(QuantMix::kQ4_K_M, "blk.2.attn_q.weight", 576), GgmlType::kQ5_0);
  EXPECT_EQ(type_of(QuantMix::kQ4_K_M, "blk.0.attn_v.weight", 576), GgmlType::kQ8_0);  // Q6_K -> Q8_0
  EXPECT_EQ(type_of(QuantMix::kQ5_K_M, "blk.2.attn_q.weight", 576), GgmlType::kQ5_1);
  EXPECT_EQ(*weight_tensor_type(QuantMix::kPure, GgmlType::kQ3_K, "x", 576, 1, true), GgmlType::kQ4_0);
  EXPECT_EQ(*weight_tensor_type(QuantMix::kPure, GgmlType::kIQ4_XS, "x", 576, 1, true), GgmlType::kIQ4_NL);
  EXPECT_EQ(*weight_tensor_type(QuantMix::kPure, GgmlType::kQ4_K, "x", 100, 1, true), GgmlType::kF16);
  const absl::StatusOr<GgmlType> no_fallback = weight_tensor_type(QuantMix::kPure, GgmlType::kQ8_0, "x", 100, 1, true);
  EXPECT_EQ(no_fallback.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(llama_file_type(QuantMix::kQ4_K_M, GgmlType::kF32), 15u);
  EXPECT_EQ(llama_file_type(QuantMix::kQ5_K_M, GgmlType::kF32), 17u);
  EXPECT_EQ(llama_file_type(QuantMix::kQ6_K, GgmlType::kF32), 18u);
  EXPECT_EQ(llama_file_type(QuantMix::kQ8_0, GgmlType::kF32), 7u);
}

// The same seed and shape give the same underlying values whatever the types, so a
// quantized file's logits (loaded by model::load_model, run by the CPU runner) are the F32
// file's up to the quantization error: the mixtures load, decode and run end to end.
TEST(QuantMixTest, MixedFilesLoadAndRunCloseToTheF32Model) {
  const std::string tokenizer = write_synthetic_tokenizer("mix_tokenizer.gguf");
  auto logits_of = [&](const std::vector<std::string>& type_args) {
    std::vector<std::string> args = {"--layers", "4", "--hidden", "256", "--heads", "4", "--kv-heads", "2",
                                     "--ffn", "512", "--context", "256", "--seed", "5", "--threads", "2",
                                     "--tokenizer-from", tokenizer, "--out", temp_path("mix.gguf")};
    args.insert(args.end(), type_args.begin(), type_args.end());
    absl::StatusOr<MakeGgufArgs> parsed = parse_make_gguf_args(args);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_TRUE(write_random_llama(parsed->options).ok());
    model::LoadOptions options;
    options.device = model::Device::kCpu;
    options.num_kv_blocks = 8;
    options.num_threads = 1;
    absl::StatusOr<model::LoadedModel> m = model::load_model(temp_path("mix.gguf"), options);
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return std::vector<float>();
    return prefill_and_decode(m->runner.get(), {258, 104, 101, 108, 108, 111, 32, 119}, 2);
  };
  const std::vector<float> reference = logits_of({"--type", "f32"});
  ASSERT_FALSE(reference.empty());
  double ref_sq = 0;
  for (float v : reference) ref_sq += double(v) * v;
  // Relative logit error measured (2026-12-01): q8_0 0.0171, q6_k 0.0633, q5_k_m 0.0948,
  // q4_k_m 0.1960: about 3x the types' relative weight error (0.0054 / 0.018 / 0.036 /
  // 0.072, tests/unit/gguf/quantize_test.cc), as the errors of 4 layers and the LM head add
  // up. Bounds: measured + 30 %; and more bits must give a smaller error.
  const std::pair<const char*, double> mixes[] = {{"q8_0", 0.023}, {"q6_k", 0.082}, {"q5_k_m", 0.12}, {"q4_k_m", 0.25}};
  double previous = 0;
  for (const auto& [mix, bound] : mixes) {
    const std::vector<float> logits = logits_of({"--ftype", mix});
    ASSERT_EQ(logits.size(), reference.size()) << mix;
    double diff_sq = 0;
    for (size_t i = 0; i < logits.size(); ++i) diff_sq += (double(logits[i]) - reference[i]) * (logits[i] - reference[i]);
    const double rel = std::sqrt(diff_sq / ref_sq);
    std::printf("--ftype %-6s relative logit error %.4f\n", mix, rel);
    EXPECT_GT(rel, previous) << mix;  // the weights really were quantized, coarser ones more
    EXPECT_LT(rel, bound) << mix;
    previous = rel;
  }
}

// A Q4_K_M file of every architecture loads and runs on the CPU backend, close to the same
// architecture's F32 file. Measured (2026-12-01, 2 layers): llama and mistral 0.130, qwen2
// 0.076, qwen3 0.198; the bound is the 4-layer llama one of the test above (0.25).
TEST(QuantMixTest, Q4KMFilesOfEveryArchitectureLoadAndRun) {
  const std::string tokenizer = write_synthetic_tokenizer("arch_mix_tokenizer.gguf");
  auto logits_of = [&](const std::string& arch, const std::vector<std::string>& type_args) {
    std::vector<std::string> args = {"--arch", arch, "--layers", "2", "--hidden", "256", "--heads", "4",
                                     "--kv-heads", "2", "--ffn", "512", "--context", "256", "--seed", "9",
                                     "--threads", "2", "--tokenizer-from", tokenizer, "--out", temp_path("arch_mix.gguf")};
    args.insert(args.end(), type_args.begin(), type_args.end());
    absl::StatusOr<MakeGgufArgs> parsed = parse_make_gguf_args(args);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (!parsed.ok() || !write_random_llama(parsed->options).ok()) return std::vector<float>();
    model::LoadOptions options;
    options.device = model::Device::kCpu;
    options.num_kv_blocks = 8;
    options.num_threads = 1;
    absl::StatusOr<model::LoadedModel> m = model::load_model(temp_path("arch_mix.gguf"), options);
    EXPECT_TRUE(m.ok()) << arch << ": " << m.status();
    if (!m.ok()) return std::vector<float>();
    EXPECT_EQ(m->config.architecture, arch);
    return prefill_and_decode(m->runner.get(), {258, 104, 101, 108, 108, 111, 32, 119}, 2);
  };
  for (const char* arch : {"llama", "mistral", "qwen2", "qwen3", "gemma3", "phi3"}) {
    const std::vector<float> reference = logits_of(arch, {"--type", "f32"});
    const std::vector<float> q4km = logits_of(arch, {"--ftype", "q4_k_m"});
    ASSERT_FALSE(reference.empty()) << arch;
    ASSERT_EQ(q4km.size(), reference.size()) << arch;
    double diff_sq = 0, ref_sq = 0;
    for (size_t i = 0; i < q4km.size(); ++i) {
      ASSERT_TRUE(std::isfinite(q4km[i])) << arch;
      diff_sq += (double(q4km[i]) - reference[i]) * (q4km[i] - reference[i]);
      ref_sq += double(reference[i]) * reference[i];
    }
    const double rel = std::sqrt(diff_sq / ref_sq);
    std::printf("--arch %-7s --ftype q4_k_m relative logit error %.4f\n", arch, rel);
    EXPECT_GT(rel, 0.0) << arch;  // the weights really were quantized
    EXPECT_LT(rel, 0.25) << arch;
  }
}

TEST(QuantMixTest, FlagsSelectTheTypeOrTheMixture) {
  auto parse = [](std::vector<std::string> args) {
    args.insert(args.end(), {"--tokenizer-from", "t.gguf", "--out", "o.gguf"});
    return parse_make_gguf_args(args);
  };
  absl::StatusOr<MakeGgufArgs> a = parse({"--ftype", "Q4_K_M", "--preset", "llama-3.2-1b"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->options.mix, QuantMix::kQ4_K_M);
  EXPECT_EQ(a->options.name, "flashserve-random-llama-3.2-1b-q4_k_m");
  a = parse({"--type", "q4_k"});  // ggml spells it q4_K; either case works
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->options.mix, QuantMix::kPure);
  EXPECT_EQ(a->options.weight_type, GgmlType::kQ4_K);
  // The default 576-wide shape is fine for the K-quants: its rows fall back.
  EXPECT_EQ(a->options.shape.hidden_size, 576);
}

}  // namespace
}  // namespace flashserve::tools
