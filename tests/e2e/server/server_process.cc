#include "tests/e2e/server/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace flashserve::e2e {
namespace {

using Clock = std::chrono::steady_clock;

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail(const std::string& text, size_t n = 4000) {
  return text.size() <= n ? text : text.substr(text.size() - n);
}

}  // namespace

// A binary of the build, or the one the environment names (a bundle on the GPU machine).
std::string binary(const char* env_name, const char* built) {
  const char* env = std::getenv(env_name);
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(built);
}

std::string server_binary() { return binary("FLASHSERVE_E2E_SERVER_BIN", FLASHSERVE_SERVER_BIN); }
std::string cli_binary() { return binary("FLASHSERVE_E2E_CLI_BIN", FLASHSERVE_CLI_BIN); }
std::string canned_server_binary() {
  return binary("FLASHSERVE_E2E_CANNED_SERVER_BIN", FLASHSERVE_CANNED_SERVER_BIN);
}

std::string stall_server_binary() {
  return binary("FLASHSERVE_E2E_STALL_SERVER_BIN", FLASHSERVE_STALL_SERVER_BIN);
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.out.append(buf, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string default_model_path() {
  const char* env = std::getenv("FLASHSERVE_E2E_MODEL");
  const std::string path = env != nullptr && *env != '\0'
                               ? std::string(env)
                               : std::string(FLASHSERVE_SOURCE_DIR) +
                                     "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  return file_exists(path) ? path : std::string();
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::start(
    const std::string& model_path, const std::vector<std::string>& extra_args,
    std::chrono::seconds timeout) {
  return start_binary(server_binary(), model_path, extra_args, timeout);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::start_binary(
    const std::string& binary, const std::string& model_path,
    const std::vector<std::string>& extra_args, std::chrono::seconds timeout) {
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  char dir_template[] = "/tmp/flashserve-e2e-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return absl::InternalError("mkdtemp failed");
  server->log_path_ = std::string(dir_template) + "/server.log";

  std::vector<std::string> args = {binary, "--model", model_path,
                                   "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0",
                                   "--http-port", "0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, server->log_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  const int rc = posix_spawn(&server->pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot spawn ", args[0], ": errno ", rc));
  }

  // HOST is --host as given, IPv6 addresses in brackets ("[::1]").
  const std::regex grpc_re(R"(listening on (\S+):(\d+) \(gRPC\))");
  const std::regex metrics_re(R"(metrics on http://\S+:(\d+)/metrics)");
  const std::regex http_re(R"(listening on \S+:(\d+) \(HTTPS?\))");
  const auto give_up = Clock::now() + timeout;
  while (true) {
    const std::string log = server->log();
    std::smatch g, m;
    if (std::regex_search(log, g, grpc_re) && std::regex_search(log, m, metrics_re)) {
      server->grpc_host_ = g[1];
      server->grpc_port_ = std::stoi(g[2]);
      server->metrics_port_ = std::stoi(m[1]);
      std::smatch h;  // logged before the metrics line, when served
      if (std::regex_search(log, h, http_re)) server->http_port_ = std::stoi(h[1]);
      break;
    }
    if (!server->running()) {
      return absl::InternalError(absl::StrCat("flashserve exited (status ",
                                              server->exit_status_.value_or(-1),
                                              ") before listening:\n", tail(log)));
    }
    if (Clock::now() > give_up) {
      return absl::DeadlineExceededError(absl::StrCat("flashserve did not report its ports:\n",
                                                      tail(log)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  server->channel_ =
      grpc::CreateChannel(server->target(), grpc::InsecureChannelCredentials());
  return server;
}

ServerProcess::~ServerProcess() {
  if (running()) stop(SIGKILL, std::chrono::seconds(10));
  // Tests print the log on failure before this; nothing is left in /tmp.
  if (!log_path_.empty()) {
    ::unlink(log_path_.c_str());
    ::rmdir(log_path_.substr(0, log_path_.rfind('/')).c_str());
  }
}

bool ServerProcess::running() {
  if (pid_ <= 0 || exit_status_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return false;
}

int64_t ServerProcess::rss_kib() const {
  std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

void ServerProcess::send_signal(int signal) {
  if (running()) ::kill(pid_, signal);
}

int ServerProcess::stop(int signal, std::chrono::seconds timeout) {
  if (!running()) return exit_status_.value_or(-1);
  ::kill(pid_, signal);
  const auto give_up = Clock::now() + timeout;
  while (running()) {
    if (Clock::now() > give_up) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return *exit_status_;
}

grpc::health::v1::HealthCheckResponse::ServingStatus ServerProcess::health(
    grpc::Status* rpc_status) {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  auto context = context_with_timeout(std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(context.get(), request, &response);
  if (rpc_status != nullptr) *rpc_status = status;
  return status.ok() ? response.status() : grpc::health::v1::HealthCheckResponse::UNKNOWN;
}

absl::Status ServerProcess::wait_serving(std::chrono::seconds timeout) {
  const auto give_up = Clock::now() + timeout;
  while (Clock::now() < give_up) {
    if (health() == grpc::health::v1::HealthCheckResponse::SERVING) return absl::OkStatus();
    if (!running()) {
      return absl::InternalError(absl::StrCat("flashserve exited:\n", tail(log())));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("not SERVING in time:\n", tail(log())));
}

std::string ServerProcess::log() const { return read_file(log_path_); }

absl::StatusOr<std::string> ServerProcess::scrape_metrics() const {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(metrics_port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to metrics port ", metrics_port_));
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::UnavailableError("send failed");
  }
  std::string response;
  char buf[65536];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) response.append(buf, static_cast<size_t>(n));
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::DataLossError(absl::StrCat("bad HTTP response: ", tail(response, 200)));
  }
  if (response.find(" 200 ") == std::string::npos || response.find(" 200 ") > body) {
    return absl::UnavailableError(absl::StrCat("HTTP error: ", response.substr(0, body)));
  }
  return response.substr(body + 4);
}

absl::StatusOr<double> metric_value(const std::string& exposition, const std::string& name,
                                    const std::string& labels) {
  const std::vector<std::string> wanted =
      labels.empty() ? std::vector<std::string>{} : absl::StrSplit(labels, ',');
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    size_t value_at = name.size() + 1;
    std::vector<std::string> have;
    if (line[name.size()] == '{') {
      const size_t close = line.find("} ", name.size());
      if (close == std::string::npos) continue;
      have = absl::StrSplit(line.substr(name.size() + 1, close - name.size() - 1), ',');
      value_at = close + 2;
    } else if (line[name.size()] != ' ') {
      continue;
    }
    const bool all = std::all_of(wanted.begin(), wanted.end(), [&](const std::string& w) {
      return std::find(have.begin(), have.end(), w) != have.end();
    });
    if (all) return std::stod(line.substr(value_at));
  }
  return absl::NotFoundError(absl::StrCat("no sample ", name, "{", labels, "} in /metrics"));
}

std::unique_ptr<grpc::ClientContext> context_with_timeout(std::chrono::milliseconds timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  return context;
}

}  // namespace flashserve::e2e
