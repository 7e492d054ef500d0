// Every decoder of model/gguf/dequant.h against gguf-py's numpy decoders (gguf.quants) on
// random blocks: tests/data/gguf_quant_blocks.txt (tools/golden/gguf_quants_golden.py
// blocks, see tests/data/README.md) holds the blocks, a hash of the whole fp32 output and
// sampled elements; every bit must match. Also our reference-rounding encoders against
// gguf-py's quantizers, byte for byte.
#include <bit>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "model/gguf/dequant.h"
#include "model/gguf/ggml_type.h"
#include "model/gguf/quantize.h"

namespace flashserve::model {
namespace {

constexpr char kGoldenPath[] = FLASHSERVE_SOURCE_DIR "/tests/data/gguf_quant_blocks.txt";

struct GoldenType {
  int64_t num_bytes = 0;
  int64_t num_elements = 0;
  uint64_t hash = 0;
  std::string raw;                      // the blocks
  std::vector<std::pair<int64_t, uint32_t>> samples;  // (element, fp32 bits)
};

uint64_t fnv1a64(const void* data, size_t size) {
  uint64_t h = 0xCBF29CE484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

// The reference encodings: gguf-py's quantizer (ggml's reference rounding) of `input`.
struct GoldenQuant {
  std::vector<float> input;
  std::map<std::string, uint64_t> hashes;  // type name -> fnv1a64 of the encoding
};

void read_golden(std::map<std::string, GoldenType>* golden, GoldenQuant* quant) {
  std::ifstream in(kGoldenPath);
  EXPECT_TRUE(in.good()) << kGoldenPath;
  std::map<std::string, GoldenType>& out = *golden;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string kind, name;
    fields >> kind >> name;
    if (kind == "qinput") {  // `name` is the hex of up to 16 floats
      const std::string bytes = absl::HexStringToBytes(name);
      ASSERT_EQ(bytes.size() % 4, 0u) << line;
      const size_t old_size = quant->input.size();
      quant->input.resize(old_size + bytes.size() / 4);
      std::memcpy(quant->input.data() + old_size, bytes.data(), bytes.size());
      continue;
    }
    if (kind == "quant") {
      fields >> std::hex >> quant->hashes[name];
      continue;
    }
    GoldenType& t = out[name];
    if (kind == "type") {
      fields >> t.num_bytes >> t.num_elements >> std::hex >> t.hash;
    } else if (kind == "hex") {
      std::string hex;
      fields >> hex;
      ASSERT_EQ(hex.size() % 2, 0u) << line;
      t.raw += absl::HexStringToBytes(hex);
    } else if (kind == "sample") {
      int64_t index = 0;
      uint32_t bits = 0;
      fields >> index >> std::hex >> bits;
      t.samples.emplace_back(index, bits);
    } else {
      ADD_FAILURE() << "unknown record: " << line;
    }
  }
}

GgmlType type_named(const std::string& name) {
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlType t = static_cast<GgmlType>(id);
    if (ggml_type_name(t) == name) return t;
  }
  ADD_FAILURE() << "unknown type " << name;
  return GgmlType::kF32;
}

TEST(QuantGoldenTest, EveryReadableTypeDecodesBitForBitAsGgufPy) {
  std::map<std::string, GoldenType> golden;
  GoldenQuant quant;
  read_golden(&golden, &quant);
  std::vector<std::string> seen;
  for (const auto& [name, g] : golden) {
    SCOPED_TRACE(name);
    const GgmlType type = type_named(name);
    ASSERT_EQ(static_cast<int64_t>(g.raw.size()), g.num_bytes);
    const GgmlTypeTraits traits = ggml_type_traits(type);
    ASSERT_EQ(g.num_bytes, g.num_elements / traits.block_size * traits.block_bytes);
    std::vector<float> out(g.num_elements);
    ASSERT_TRUE(dequantize_row(type, reinterpret_cast<const uint8_t*>(g.raw.data()), g.num_elements, out.data()).ok());
    int mismatches = 0;
    for (const auto& [index, bits] : g.samples) {
      const uint32_t got = std::bit_cast<uint32_t>(out[index]);
      if (got != bits && ++mismatches <= 5) {
        ADD_FAILURE() << "element " << index << ": ours " << std::hex << got << " (" << out[index]
                      << "), gguf-py " << bits << " (" << std::bit_cast<float>(bits) << ")";
      }
    }
    EXPECT_EQ(fnv1a64(out.data(), out.size() * sizeof(float)), g.hash);
    // Decoding block by block gives the same values (rows start on block boundaries).
    const int64_t half = g.num_elements / traits.block_size / 2 * traits.block_size;
    std::vector<float> second(g.num_elements - half);
    ASSERT_TRUE(dequantize_row(type, reinterpret_cast<const uint8_t*>(g.raw.data()) + half / traits.block_size *
                                                                                     traits.block_bytes,
                               g.num_elements - half, second.data()).ok());
    EXPECT_TRUE(std::equal(second.begin(), second.end(), out.begin() + half));
    seen.push_back(name);
  }
  // The golden covers every type we claim to read.
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlType t = static_cast<GgmlType>(id);
    if (!ggml_type_can_dequantize(t)) continue;
    EXPECT_TRUE(golden.contains(ggml_type_name(t))) << ggml_type_name(t) << " has no golden";
  }
  EXPECT_EQ(seen.size(), 15u);
}

// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and BF16 encode with ggml's reference rounding: byte for
// byte what gguf-py's quantizer (a port of it) writes.
TEST(QuantGoldenTest, ReferenceRoundingEncodersMatchGgufPyByteForByte) {
  std::map<std::string, GoldenType> golden;
  GoldenQuant quant;
  read_golden(&golden, &quant);
  ASSERT_EQ(quant.input.size(), 1024u);
  ASSERT_EQ(quant.hashes.size(), 6u);
  for (const auto& [name, hash] : quant.hashes) {
    const GgmlType type = type_named(name);
    auto size = quantized_size(type, static_cast<int64_t>(quant.input.size()));
    ASSERT_TRUE(size.ok()) << size.status();
    std::vector<uint8_t> out(*size);
    ASSERT_TRUE(quantize_row(type, quant.input, out).ok()) << name;
    EXPECT_EQ(fnv1a64(out.data(), out.size()), hash) << name;
  }
}

}  // namespace
}  // namespace flashserve::model
