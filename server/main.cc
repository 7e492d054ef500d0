// flashserve: the gRPC (and OpenAI HTTP) LLM server (contract in docs/design.md and
// docs/api.md).
//
//   flashserve --model PATH [--device auto|cpu|cuda] [--host 0.0.0.0] [--port 50051]
//              [--http-port 8000] [--metrics-port 9464] [--model-name NAME] [limits...]
//              [--tls-cert C --tls-key K [--tls-client-ca CA]] [--auth-token-file F]
//   flashserve --version
//
// The flags, start-up, signals and drain are server/server_main.h's; this binary serves the
// GGUF file through the model loader.
#include "server/server_main.h"

int main(int argc, char** argv) {
  return flashserve::server::run_server(
      argc, argv,
      {.name = "flashserve",
       .usage = "--model PATH [--device auto|cpu|cuda] [--host 0.0.0.0] [--port 50051] "
                "[--http-port 8000] [--metrics-port 9464] [--model-name NAME] "
                "[--log-format text|json] "
                "[--max-num-seqs N] [--max-batch-tokens N] [--max-waiting N] [--kv-cache-mb MB] "
                "[--threads N] [--drain-timeout S] [--tls-cert C --tls-key K [--tls-client-ca CA]] "
                "[--auth-token-file F]",
       .flags_file = "",
       .load_model = flashserve::server::load_model_file});
}
