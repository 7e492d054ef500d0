// Issue 10 defect 7: options that would leave the server unable to serve are refused at
// start, with the flag (as typed, dashed) and the value in the message.
#include "server/api/server_options.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flashserve::api {
namespace {

using ::testing::HasSubstr;

ServerOptions valid() {
  ServerOptions o;
  o.model_path = "models/any.gguf";
  return o;
}

void expect_refused(const ServerOptions& o, const std::string& text) {
  const absl::Status status = validate_server_options(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(text));
}

TEST(ServerOptionsTest, DefaultsWithAModelAreValid) {
  EXPECT_TRUE(validate_server_options(valid()).ok());
  ServerOptions o = valid();
  o.engine.max_context = 2;
  o.engine.max_waiting = 1;
  o.drain_timeout = std::chrono::milliseconds(0);
  EXPECT_TRUE(validate_server_options(o).ok());
}

TEST(ServerOptionsTest, ConfigurationsThatCannotServeAreRefused) {
  ServerOptions o = valid();
  o.model_path = "";
  expect_refused(o, "--model is required");
  o = valid();
  o.engine.max_context = 1;
  expect_refused(o, "--max-context 1 must be 0");
  o = valid();
  o.engine.max_context = -5;
  expect_refused(o, "--max-context -5");
  o = valid();
  o.engine.max_waiting = 0;
  expect_refused(o, "--max-waiting 0 must be >= 1");
  o = valid();
  o.engine.max_num_seqs = 0;
  expect_refused(o, "--max-num-seqs 0");
  o = valid();
  o.engine.max_batch_tokens = -1;
  expect_refused(o, "--max-batch-tokens -1");
  o = valid();
  o.engine.max_batch_tokens = 0;  // the backend's default (model/step_budget.h)
  EXPECT_TRUE(validate_server_options(o).ok());
  o = valid();
  o.port = 70000;
  expect_refused(o, "--port 70000 is not a port");
  o = valid();
  o.metrics_port = -2;
  expect_refused(o, "--metrics-port -2");
  o = valid();
  o.http_port = -2;
  expect_refused(o, "--http-port -2 is not a port (or -1 for none)");
  o = valid();
  o.http_port = 65536;
  expect_refused(o, "--http-port 65536");
  o = valid();
  o.http_port = -1;  // off
  EXPECT_TRUE(validate_server_options(o).ok());
  o = valid();
  o.drain_timeout = std::chrono::milliseconds(-1000);
  expect_refused(o, "--drain-timeout -1 s is negative");
  o = valid();
  o.kv_cache_mb = -1;
  expect_refused(o, "--kv-cache-mb -1");
}

TEST(ServerOptionsTest, SecondsFlagsMustBeFiniteAndNonNegative) {
  EXPECT_EQ(seconds_flag("drain-timeout", 2.5).value(), std::chrono::milliseconds(2500));
  EXPECT_EQ(seconds_flag("drain-timeout", 0).value(), std::chrono::milliseconds(0));
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity(), 1e12}) {
    auto parsed = seconds_flag("drain-timeout", bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("--drain-timeout"));
  }
}

TEST(ServerOptionsTest, HalfATlsConfigurationIsRefused) {
  ServerOptions o = valid();
  o.tls.cert_path = "/etc/hostname";
  expect_refused(o, "--tls-cert is given without --tls-key (TLS needs both)");
  o = valid();
  o.tls.key_path = "/etc/hostname";
  expect_refused(o, "--tls-key is given without --tls-cert");
  o = valid();
  o.tls.client_ca_path = "/etc/hostname";
  expect_refused(o, "--tls-client-ca needs --tls-cert");
  o = valid();
  o.tls.cert_path = "/nonexistent/cert.pem";
  o.tls.key_path = "/etc/hostname";
  expect_refused(o, "--tls-cert '/nonexistent/cert.pem' cannot be read");
  o = valid();
  o.auth.token_file = "/nonexistent/tokens";
  expect_refused(o, "--auth-token-file '/nonexistent/tokens' cannot be read");
}

// Flags are spelled with dashes in the docs and with underscores by absl: only the names of
// "--flags" change, never their values or other arguments.
TEST(ServerOptionsTest, DashedFlagNamesBecomeUnderscored) {
  std::vector<std::string> in = {"flashserve", "--metrics-port", "-1", "--max-num-seqs=256",
                                 "--canned-text=a-b c", "--noprefix-caching", "-x-y", "a-b"};
  std::vector<char*> argv;
  for (std::string& a : in) argv.push_back(a.data());
  EXPECT_EQ(dashes_to_underscores(static_cast<int>(argv.size()), argv.data()),
            (std::vector<std::string>{"flashserve", "--metrics_port", "-1", "--max_num_seqs=256",
                                      "--canned_text=a-b c", "--noprefix_caching", "-x-y",
                                      "a-b"}));
}

}  // namespace
}  // namespace flashserve::api
