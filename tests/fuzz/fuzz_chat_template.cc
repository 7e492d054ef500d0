// libFuzzer target: chat templates. The input is split at NUL bytes: the first part is a
// template text (or a family name) for ChatTemplate::from_template_text, the rest alternate
// role / content of the messages rendered with each known family and with the parsed template.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/text/chat_template.h"

namespace {

using flashserve::model::ChatMessage;
using flashserve::model::ChatTemplate;

std::vector<std::string_view> split_nul(std::string_view data) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= data.size(); ++i) {
    if (i == data.size() || data[i] == '\0') {
      parts.push_back(data.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

void render(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  (void)t.render(messages, /*add_generation_prompt=*/true);
  (void)t.render(messages, /*add_generation_prompt=*/false);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts =
      split_nul(std::string_view(reinterpret_cast<const char*>(data), size));
  std::vector<ChatMessage> messages;
  for (size_t i = 1; i + 1 < parts.size(); i += 2) {
    messages.push_back({std::string(parts[i]), std::string(parts[i + 1])});
  }
  if (auto parsed = ChatTemplate::from_template_text(parts[0]); parsed.ok()) {
    render(*parsed, messages);
  }
  for (const char* family : {"chatml", "llama2", "llama2-sys", "llama2-sys-bos",
                             "llama2-sys-strip", "zephyr", "llama3", "gemma", "phi3"}) {
    auto t = ChatTemplate::from_template_text(family);
    if (t.ok()) render(*t, messages);
  }
  return 0;
}
