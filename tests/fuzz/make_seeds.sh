#!/usr/bin/env bash
# Regenerates the seed corpora in tests/fuzz/corpus/ (committed; run again only to change them).
#   gguf/          small valid GGUF v3 files (metadata of every value type, F32/F16/Q8_0/Q4_0/
#                  Q4_1 tensors, a SentencePiece vocabulary, a chat template) — tests/fuzz/make_gguf_seeds.py
#   tokenizer/     texts: ASCII, multilingual UTF-8, control-token spellings, invalid UTF-8
#   chat_template/ "TEMPLATE\0role\0content\0..." inputs (family names and template texts)
#   request/       GenerateRequests in protobuf wire format (protoc --encode of text protos)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
corpus="$root/tests/fuzz/corpus"
python3 "$root/tests/fuzz/make_gguf_seeds.py" "$corpus/gguf"

t="$corpus/tokenizer"
printf 'Hello world, the capital of France is Paris.' > "$t/ascii"
printf 'Gr\xc3\xbc\xc3\x9fe, \xe4\xb8\x96\xe7\x95\x8c! \xf0\x9f\x98\x80 caf\xc3\xa9  \t\n  spaces' > "$t/utf8"
printf '<|im_start|>user\nhi<|im_end|>\n<|endoftext|><s></s>' > "$t/control"
printf 'bad \xff\xfe \xc0\xaf \xed\xa0\x80 end\xe2\x82' > "$t/invalid_utf8"
printf '   leading and trailing   ' > "$t/spaces"
printf "12345 3.14159 don't I'll we've HELLO" > "$t/numbers_contractions"
printf '  `l\xe2\x96\x81<f\x01K2a' > "$t/space_marker"  # fuzz_tokenizer finding: U+2581 in the text

c="$corpus/chat_template"
printf 'chatml\0system\0Be brief.\0user\0Hi!\0assistant\0Hello.\0user\0Bye' > "$c/chatml"
printf 'llama2-sys\0system\0S\0user\0U\0assistant\0A\0user\0U2' > "$c/llama2"
printf 'llama3\0user\0hello' > "$c/llama3"
printf 'zephyr\0user\0hello\0assistant\0' > "$c/zephyr"
printf "{%% for message in messages %%}{{'<|im_start|>' + message['role'] + '\\\\n' + message['content'] + '<|im_end|>' + '\\\\n'}}{%% endfor %%}{%% if add_generation_prompt %%}{{ '<|im_start|>assistant\\\\n' }}{%% endif %%}\0user\0hi" > "$c/chatml_jinja"

r="$corpus/request"
encode() {
  protoc --encode=flashserve.v1.GenerateRequest --proto_path="$root/proto" \
    "$root/proto/flashserve/v1/generation.proto" > "$r/$1"
}
echo 'prompt: "The capital of France is" sampling { temperature: 0 } stopping { max_new_tokens: 8 }' | encode prompt
echo 'chat { messages { role: "system" content: "Be brief." } messages { role: "user" content: "Hi" } } sampling { temperature: 0.7 top_p: 0.9 top_k: 40 min_p: 0.05 repetition_penalty: 1.1 presence_penalty: 0.5 frequency_penalty: -0.5 seed: 7 }' | encode chat
echo 'token_ids { ids: [1, 2, 3, 49151] } stopping { max_new_tokens: 4 stop: ["\n", "END"] stop_token_ids: [2] ignore_eos: true } logprobs: true top_logprobs: 5' | encode token_ids
echo 'prompt: "x" sampling { temperature: 100.00001 }' | encode out_of_range
echo "corpora written under $corpus"
