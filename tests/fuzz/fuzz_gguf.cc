// libFuzzer target: the GGUF reader on arbitrary bytes — header, metadata, tensor table, the
// typed getters, the tokenizer and chat-template readers, and dequantization of small tensors.
// Any crash, sanitizer report or hang is a bug (parsers must return a status, never crash).
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/gguf/gguf.h"
#include "model/text/chat_template.h"
#include "model/text/tokenizer.h"

namespace {

constexpr int64_t kMaxDequantElements = 1 << 16;  // keep each input fast

void exercise(const flashserve::model::GgufFile& file) {
  for (const auto& [key, value] : file.metadata()) {
    (void)file.get_string(key);
    (void)file.get_int(key);
    (void)file.get_float(key);
    (void)file.get_bool(key);
    (void)file.get_string_array(key);
    (void)file.get_int_array(key);
    (void)file.get_float_array(key);
  }
  for (const auto& tensor : file.tensors()) {
    if (tensor.num_elements <= kMaxDequantElements) (void)file.dequantize(tensor);
  }
  if (auto vocab = flashserve::model::tokenizer_vocab_from_gguf(file); vocab.ok()) {
    (void)flashserve::model::tokenizer_from_vocab(std::move(*vocab));
  }
  (void)flashserve::model::ChatTemplate::from_gguf(file);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = flashserve::model::GgufFile::from_bytes(
      std::string(reinterpret_cast<const char*>(data), size));
  if (file.ok()) exercise(**file);
  return 0;
}
