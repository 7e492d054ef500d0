// End-to-end security (issue 10): TLS with client certificates (mTLS) and bearer tokens on
// the real server, over loopback, with certificates made by openssl inside the test. Checks
// that plaintext clients, clients without a certificate and clients whose certificate another
// CA signed are refused; that a missing or wrong token gets UNAUTHENTICATED with the same
// message; that health stays open for probes; that SIGHUP reloads the tokens; and that
// flashserve-cli speaks TLS + tokens.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/server/certificates.h"
#include "tests/e2e/server/e2e_util.h"
#include "tests/e2e/server/server_process.h"

namespace flashserve::e2e {
namespace {

using ::testing::HasSubstr;

class SecurityE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = default_model_path();
    if (model_.empty()) GTEST_SKIP() << "default model not in models/";
    if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "openssl not installed (Debian package 'openssl')";
    }
    char dir[] = "/tmp/flashserve-tls-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    ASSERT_TRUE(make_certificates(dir_)) << read_file(dir_ + "/openssl.log");
    std::ofstream(dir_ + "/tokens") << "# accepted tokens\nalpha-token\nbeta-token\n";
    auto server = ServerProcess::start(
        model_, {"--tls-cert", dir_ + "/server.pem", "--tls-key", dir_ + "/server.key",
                 "--tls-client-ca", dir_ + "/ca.pem", "--auth-token-file", dir_ + "/tokens"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    server_->set_channel(channel("client"));
    ASSERT_TRUE(server_->wait_serving().ok()) << server_->log();
  }
  void TearDown() override {
    if (server_) {
      EXPECT_EQ(server_->stop(SIGTERM), 0);
    }
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }

  // A TLS channel trusting our CA, presenting `client`'s certificate ("" = none).
  std::shared_ptr<grpc::Channel> channel(const std::string& client,
                                         const std::string& trusted_ca = "ca") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = read_file(dir_ + "/" + trusted_ca + ".pem");
    if (!client.empty()) {
      ssl.pem_cert_chain = read_file(dir_ + "/" + client + ".pem");
      ssl.pem_private_key = read_file(dir_ + "/" + client + ".key");
    }
    grpc::ChannelArguments args;
    args.SetString(GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, "localhost");
    return grpc::CreateCustomChannel(server_->target(), grpc::SslCredentials(ssl), args);
  }

  // GetModelInfo with `token` ("" = no authorization metadata).
  grpc::Status info(const std::shared_ptr<grpc::Channel>& ch, const std::string& token) {
    auto context = context_with_timeout(std::chrono::seconds(10));
    if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
    v1::ModelInfo response;
    return v1::Generation::NewStub(ch)->GetModelInfo(context.get(), v1::GetModelInfoRequest(),
                                                     &response);
  }

  std::string model_;
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(SecurityE2E, OnlyTrustedClientsWithATokenAreServed) {
  // The right certificate and either token: served, generation included.
  EXPECT_TRUE(info(channel("client"), "alpha-token").ok());
  EXPECT_TRUE(info(channel("client"), "beta-token").ok());
  auto lower_case = context_with_timeout(std::chrono::seconds(10));  // RFC 7235 (issue 23)
  lower_case->AddMetadata("authorization", "bearer alpha-token");
  v1::ModelInfo lower_case_info;
  EXPECT_TRUE(v1::Generation::NewStub(channel("client"))
                  ->GetModelInfo(lower_case.get(), v1::GetModelInfoRequest(), &lower_case_info)
                  .ok());
  auto context = context_with_timeout(kRpcTimeout);
  context->AddMetadata("authorization", "Bearer alpha-token");
  v1::GenerateResponse response;
  const grpc::Status generated = v1::Generation::NewStub(channel("client"))
                                     ->Generate(context.get(), greedy_request("Hi", 2), &response);
  EXPECT_TRUE(generated.ok()) << generated.error_message();
  EXPECT_EQ(response.token_ids_size(), 2);

  // Missing, wrong, or not a bearer token: UNAUTHENTICATED, one message for all.
  const grpc::Status missing = info(channel("client"), "");
  const grpc::Status wrong = info(channel("client"), "alpha-tokeN");
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(missing.error_message(), wrong.error_message());
  auto basic = context_with_timeout(std::chrono::seconds(10));
  basic->AddMetadata("authorization", "Basic alpha-token");
  v1::ModelInfo ignored;
  EXPECT_EQ(v1::Generation::NewStub(channel("client"))
                ->GetModelInfo(basic.get(), v1::GetModelInfoRequest(), &ignored)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // Transport: plaintext, no client certificate, a certificate from another CA, a client
  // that does not trust the server's CA: no call gets through.
  const auto plaintext = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  EXPECT_EQ(info(plaintext, "alpha-token").error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(info(channel(""), "alpha-token").error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(info(channel("stranger"), "alpha-token").error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(info(channel("client", "other-ca"), "alpha-token").error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // Health is open to probes by default (with a valid client certificate, no token).
  EXPECT_EQ(server_->health(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(SecurityE2E, SighupReloadsTheTokens) {
  std::ofstream(dir_ + "/tokens") << "gamma-token\n";
  server_->send_signal(SIGHUP);
  bool reloaded = false;
  for (int i = 0; i < 500 && !reloaded; ++i) {
    reloaded = info(channel("client"), "gamma-token").ok();
    if (!reloaded) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(reloaded) << server_->log();
  EXPECT_EQ(info(channel("client"), "alpha-token").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(server_->log(), HasSubstr("SIGHUP: auth tokens reloaded"));
  // A reload that finds no token keeps the tokens in use, and says so.
  std::ofstream(dir_ + "/tokens") << "# nothing\n";
  server_->send_signal(SIGHUP);
  for (int i = 0; i < 500 && server_->log().find("NOT reloaded") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT(server_->log(), HasSubstr("auth tokens NOT reloaded"));
  EXPECT_TRUE(info(channel("client"), "gamma-token").ok());
}

TEST_F(SecurityE2E, CliSpeaksTlsAndTokens) {
  std::ofstream(dir_ + "/cli-token") << "beta-token\n";
  const std::string tls = " --target " + server_->target() + " --tls-ca " + dir_ +
                          "/ca.pem --tls-cert " + dir_ + "/client.pem --tls-key " + dir_ +
                          "/client.key --tls-server-name localhost";
  auto run = [](const std::string& args) {
    CommandResult r = run_command(cli_binary() + args + " 2>&1");
    return std::make_pair(r.exit_code, r.out);
  };
  auto [code, out] = run(tls + " --token-file " + dir_ + "/cli-token tokenize --text hello");
  EXPECT_EQ(code, 0) << out;
  std::tie(code, out) = run(tls + " tokenize --text hello");  // no token
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("UNAUTHENTICATED"));
}

}  // namespace
}  // namespace flashserve::e2e
