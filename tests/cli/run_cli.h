// Runs the `stitch` binary the build made (STITCH_CLI_PATH) with an environment prefix, for the
// command-line tests: its exit code and everything it printed.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace stitch::clitest {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

inline Result runCli(const std::string& args, const std::string& env = "") {
  std::string cmd = env + " " + STITCH_CLI_PATH + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace stitch::clitest
