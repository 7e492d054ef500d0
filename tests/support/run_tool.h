#pragma once
// Running one of our built executables from a test: its exit status and its output
// (stdout and stderr together), for the tests of command-line tools' messages.
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace flashserve::testing {

// Runs `FLASHSERVE_BINARY_DIR/bin/<tool> <args>` through the shell, appends everything it
// prints to *output and returns its exit status (-1 when it could not be run or did not exit).
inline int run_built_tool(const std::string& tool, const std::string& args, std::string* output) {
  const std::string command =
      std::string(FLASHSERVE_BINARY_DIR "/bin/") + tool + " " + args + " 2>&1";
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), p)) > 0) output->append(buffer, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace flashserve::testing
