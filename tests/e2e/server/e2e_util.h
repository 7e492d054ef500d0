#pragma once
// Small client helpers shared by the e2e suites.
#include <sys/socket.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <string>
#include <vector>

#include "flashserve/v1/generation.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/server/server_process.h"

namespace flashserve::e2e {

// Generous bound for one generation on a loaded 2-core machine; only ever hit on a hang.
inline constexpr std::chrono::seconds kRpcTimeout{180};

// The server's memory comes back to at most baseline + slack: polled every 100 ms for
// `patience` (calls are freed asynchronously, and the server's HeapTrimmer looks once a
// second), then checked where RSS bounds apply (kRssBoundsApply), printed otherwise.
inline void expect_rss_back(const ServerProcess& server, int64_t baseline_kib, int64_t slack_kib,
                            std::chrono::milliseconds patience) {
  int64_t rss = server.rss_kib();
  for (auto waited = std::chrono::milliseconds(0);
       waited < patience && rss > baseline_kib + slack_kib;
       waited += std::chrono::milliseconds(100)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    rss = server.rss_kib();
  }
  if (kRssBoundsApply) {
    EXPECT_LE(rss, baseline_kib + slack_kib) << "baseline " << baseline_kib << " KiB";
  } else {
    std::printf("RSS %lld KiB, baseline %lld: not bounded in a sanitizer build\n",
                static_cast<long long>(rss), static_cast<long long>(baseline_kib));
  }
}

// Writes all of `bytes` to the socket (no SIGPIPE); false when the peer is gone.
inline bool send_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

inline v1::GenerateRequest greedy_request(const std::string& prompt, int max_new_tokens) {
  v1::GenerateRequest request;
  request.set_prompt(prompt);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_new_tokens(max_new_tokens);
  return request;
}

struct UnaryResult {
  grpc::Status status;
  v1::GenerateResponse response;
};

inline UnaryResult generate(v1::Generation::Stub* stub, const v1::GenerateRequest& request,
                            std::chrono::milliseconds timeout = kRpcTimeout) {
  UnaryResult result;
  auto context = context_with_timeout(timeout);
  result.status = stub->Generate(context.get(), request, &result.response);
  return result;
}

struct StreamResult {
  grpc::Status status;
  std::vector<v1::GenerateStreamResponse> messages;
  std::string text() const {
    std::string out;
    for (const auto& m : messages) out += m.text();
    return out;
  }
  std::vector<int32_t> token_ids() const {
    std::vector<int32_t> out;
    for (const auto& m : messages) out.insert(out.end(), m.token_ids().begin(), m.token_ids().end());
    return out;
  }
};

inline StreamResult generate_stream(v1::Generation::Stub* stub,
                                    const v1::GenerateRequest& request,
                                    std::chrono::milliseconds timeout = kRpcTimeout) {
  StreamResult result;
  auto context = context_with_timeout(timeout);
  auto reader = stub->GenerateStream(context.get(), request);
  v1::GenerateStreamResponse message;
  while (reader->Read(&message)) result.messages.push_back(message);
  result.status = reader->Finish();
  return result;
}

inline v1::ModelInfo model_info(v1::Generation::Stub* stub) {
  auto context = context_with_timeout(std::chrono::seconds(30));
  v1::ModelInfo info;
  grpc::Status status = stub->GetModelInfo(context.get(), v1::GetModelInfoRequest(), &info);
  if (!status.ok()) info.Clear();
  return info;
}

// Polls GetModelInfo until no request runs or waits and no KV block is in use; false after
// `timeout`.
inline bool wait_idle(v1::Generation::Stub* stub,
                      std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < give_up) {
    const v1::ModelInfo info = model_info(stub);
    if (info.has_engine() && info.engine().num_running() == 0 &&
        info.engine().num_waiting() == 0 && info.kv_cache().num_blocks_used() == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace flashserve::e2e
