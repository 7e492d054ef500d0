#pragma once
// Requests arrive as raw bytes (the services register gRPC's raw callback methods) so that a
// request that is not a valid protobuf message gets INVALID_ARGUMENT with a reason, instead of
// gRPC's UNIMPLEMENTED with an empty message (its callback handlers drop the parse status).
//
//   parse_request()   bytes -> message; InvalidArgument("request: not a valid
//                     flashserve.v1.GenerateRequest: <protobuf's reason>") when they are not.
//   to_byte_buffer()  message -> bytes for a response.
//
// Protobuf reports why a parse failed only through its log (e.g. "String field ... contains
// invalid UTF-8 data"). install_protobuf_log_handler() routes that log through a handler
// that, during parse_request(), captures the reason for the status instead of logging it,
// and otherwise logs at most one line per kLogInterval (with the number suppressed), so a
// client cannot flood the server's log. The lines go through the server's logger (log.h:
// text or JSON as --log-format says), set by route_protobuf_log().
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/api/log.h"

namespace flashserve::api {

inline constexpr std::chrono::seconds kLogInterval{10};

absl::Status parse_request(const grpc::ByteBuffer& bytes, google::protobuf::Message* message);
grpc::ByteBuffer to_byte_buffer(const google::protobuf::Message& message);

// Logs `line` at `level` unless a line of the same `key` (what kind of line it is: "malformed
// request", a library's source line) was logged less than kLogInterval ago; then counts it,
// and the next logged line of that key says how many were suppressed. Every line a client
// can trigger goes through here.
void log_rate_limited(std::string_view key, const std::string& line,
                      LogLevel level = LogLevel::kWarning);
// The same under the key "request" (lines about malformed requests).
void log_rate_limited(const std::string& line);

// Idempotent; call before serving.
void install_protobuf_log_handler();
// Routes gRPC's own log lines (gpr_log: failed TLS handshakes, transport errors) through
// log_rate_limited(), keyed by their source line, so that they are in the --log-format
// format and a client cannot flood the log with them. Idempotent; process-wide.
void install_grpc_log_handler();
// The logger of log_rate_limited(), of protobuf's and of gRPC's lines; null =
// default_logger(). It must stay alive until it is replaced (Server routes its own there and
// resets it on destruction). Process-wide, like the libraries' log handlers.
void route_protobuf_log(const Logger* logger);
// Lines printed and suppressed by log_rate_limited() so far, all keys (for tests).
struct ProtobufLogCounts {
  int64_t printed = 0;
  int64_t suppressed = 0;
};
ProtobufLogCounts protobuf_log_counts();

}  // namespace flashserve::api
