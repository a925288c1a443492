// The command line and the STITCH_* environment: a bad value of any variable exits 2 before any
// work, its message (variable, value, valid values) on stderr; a vendor library named by a
// STITCH_*_LIBRARY variable that does not load is said, and backend auto goes on without it.
#include <gtest/gtest.h>

#include <string>

#include "run_cli.h"

namespace {

using stitch::clitest::runCliSplit;
using stitch::clitest::SplitResult;

const std::string kSoftmax = std::string(STITCH_SOURCE_DIR) + "/examples/softmax.stitch";

// Whether this build has the GPU layer `backend` (a build configured without it never opens the
// vendor library).
bool built(const std::string& backend) {
  return runCliSplit("run " + kSoftmax + " --backend " + backend).err.find("configured with") ==
         std::string::npos;
}

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
      {"STITCH_REPORT", "loud"},
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

// STITCH_CUDA_LIBRARY names a file that does not load: backend auto still runs (on the next
// backend available), and a warning names the variable, the path and the loader's reason.
TEST(CliEnvironment, ACudaLibraryThatDoesNotLoadIsLogged) {
  if (!built("cuda")) GTEST_SKIP() << "this build has no CUDA layer (STITCH_ENABLE_CUDA=OFF)";
  SplitResult r = runCliSplit("run " + kSoftmax, "STITCH_CUDA_LIBRARY=/nonexistent/libcuda.so");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("[stitch warning] STITCH_CUDA_LIBRARY=/nonexistent/libcuda.so could not "
                       "be opened (/nonexistent/libcuda.so: cannot open shared object file"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("backend cuda"), std::string::npos) << r.out;
  // Once per process.
  const size_t first = r.err.find("STITCH_CUDA_LIBRARY=");
  EXPECT_EQ(r.err.find("STITCH_CUDA_LIBRARY=", first + 1), std::string::npos) << r.err;
}

// The same for NVRTC and HIP, where the request is explicit: the error, and the warning.
TEST(CliEnvironment, NvrtcAndHipLibrariesThatDoNotLoadAreLogged) {
  if (!built("cuda") || !built("hip"))
    GTEST_SKIP() << "this build lacks the CUDA or the HIP layer (STITCH_ENABLE_CUDA/HIP=OFF)";
  SplitResult nvrtc = runCliSplit("codegen " + kSoftmax + " --target sm_90",
                                  "STITCH_NVRTC_LIBRARY=/nonexistent/libnvrtc.so");
  EXPECT_EQ(nvrtc.code, 3) << nvrtc.err;
  EXPECT_NE(nvrtc.err.find("[stitch warning] STITCH_NVRTC_LIBRARY=/nonexistent/libnvrtc.so could "
                           "not be opened (/nonexistent/libnvrtc.so: cannot open shared object"),
            std::string::npos)
      << nvrtc.err;
  SplitResult hip = runCliSplit("run " + kSoftmax + " --backend hip",
                                "STITCH_HIP_LIBRARY=/nonexistent/libamdhip64.so");
  EXPECT_EQ(hip.code, 3) << hip.err;
  EXPECT_NE(hip.err.find("[stitch warning] STITCH_HIP_LIBRARY=/nonexistent/libamdhip64.so could "
                         "not be opened (/nonexistent/libamdhip64.so: cannot open shared object"),
            std::string::npos)
      << hip.err;
}

}  // namespace
