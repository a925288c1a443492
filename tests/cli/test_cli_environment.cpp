// The command line and the STITCH_* environment: a bad value of any variable exits 2 before any
// work, its message (variable, value, valid values) on stderr.
#include <gtest/gtest.h>

#include <string>

#include "run_cli.h"

namespace {

using stitch::clitest::runCliSplit;
using stitch::clitest::SplitResult;

const std::string kSoftmax = std::string(STITCH_SOURCE_DIR) + "/examples/softmax.stitch";

// The values issue 33 tried under torch.compile, and STITCH_CPU_OPENMP=banana, which `stitch run`
// accepted (exit 0): the pool never reads the variable on a graph this small.
TEST(CliEnvironment, EveryBadValueExitsTwoBeforeAnyWork) {
  const std::pair<const char*, const char*> bad[] = {
      {"STITCH_NUM_THREADS", "0"},
      {"STITCH_SPIN_US", "abc"},
      {"STITCH_FUSION", "bogus"},
      {"STITCH_CACHE", "2"},
      {"STITCH_CACHE_MAX_MB", "-5"},
      {"STITCH_REMOTE_CACHE", "garbage"},
      {"STITCH_BACKEND", "gpu"},
      {"STITCH_LOG_LEVEL", "loud"},
      {"STITCH_DUMP", "ptx"},
      {"STITCH_SHAPE_CLASSES", "2"},
      {"STITCH_CPU_OPENMP", "2"},
      {"STITCH_CPU_STREAMING_STORES", "2"},
      {"STITCH_CPU_OPENMP", "banana"},
      {"STITCH_COMPILE_THREADS", "0"},
      {"STITCH_REMOTE_CACHE_TTL", "-1"},
      {"STITCH_DISABLE", "banana"},
  };
  for (const auto& [name, value] : bad) {
    const std::string setting = std::string(name) + "=" + value;
    SCOPED_TRACE(setting);
    SplitResult r = runCliSplit("run " + kSoftmax, setting);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_EQ(r.err.find("stitch: error: " + setting + " is not valid"), 0u) << r.err;
    EXPECT_NE(r.err.find("valid values: "), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");  // nothing ran: not even the note about default dims
  }
}

// Every command checks, not only those that would read the variable.
TEST(CliEnvironment, EveryCommandChecks) {
  for (const std::string& args : {"plan " + kSoftmax, "codegen " + kSoftmax + " --target host",
                                  std::string("demo"), std::string("cache stats")}) {
    SplitResult r = runCliSplit(args, "STITCH_CPU_OPENMP=banana");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("STITCH_CPU_OPENMP=banana is not valid"), std::string::npos) << r.err;
  }
}

// Several bad values: each on its own line, none hidden behind the first.
TEST(CliEnvironment, EveryBadValueIsNamed) {
  SplitResult r = runCliSplit("run " + kSoftmax, "STITCH_FUSION=bogus STITCH_SPIN_US=abc");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("STITCH_FUSION=bogus is not valid; valid values: stitch, basic, off\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("STITCH_SPIN_US=abc is not valid; valid values: an integer from 0 to"),
            std::string::npos)
      << r.err;
}

// ptx dumps are not built: the error says so, and does not list ptx among the valid values.
TEST(CliEnvironment, DumpPtxSaysItIsNotBuilt) {
  SplitResult r = runCliSplit("run " + kSoftmax, "STITCH_DUMP=plan,ptx");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("valid values: a comma list of plan, source, llvm (ptx dumps are not built"),
            std::string::npos)
      << r.err;
}

}  // namespace
