// Runs the `stitch` binary the build made (STITCH_CLI_PATH) with an environment prefix, for the
// command-line tests: its exit code and everything it printed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace stitch::clitest {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together (runCli), or stdout only (runCliSplit)
};

// Runs a shell command line; its exit code and its stdout.
inline Result runShell(const std::string& cmd) {
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

inline Result runCli(const std::string& args, const std::string& env = "") {
  return runShell(env + " " + STITCH_CLI_PATH + " " + args + " 2>&1");
}

// As runCli, with stderr kept apart: `out` is stdout only, `err` stderr.
struct SplitResult {
  int code = -1;
  std::string out;
  std::string err;
};

inline SplitResult runCliSplit(const std::string& args, const std::string& env = "") {
  char errPath[] = "/tmp/stitch_cli_stderr_XXXXXX";
  const int fd = mkstemp(errPath);
  if (fd < 0) return {};
  close(fd);
  Result r = runShell(env + " " + STITCH_CLI_PATH + " " + args + " 2>" + errPath);
  SplitResult s{r.code, std::move(r.out), ""};
  if (FILE* f = std::fopen(errPath, "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.err.append(buf, n);
    std::fclose(f);
  }
  std::remove(errPath);
  return s;
}

// Whether this build has the cpu backend (configured without LLVM, it reports unavailable: exit
// 3); tests that run graphs on it skip without it. Any other failure counts as having it, so that
// the tests that need it fail and say why.
inline bool haveCpuBackend() {
  static const bool have =
      runCli("run " + std::string(STITCH_SOURCE_DIR) +
                 "/examples/softmax.stitch --graph softmax --backend cpu --dim N=1",
             "STITCH_CACHE=0")
          .code != 3;
  return have;
}

}  // namespace stitch::clitest
