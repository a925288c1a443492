// Index checks through the C API (issue 33): an index a run reads out of its range (a gather's,
// a check_index's) fails the run with STITCH_ERROR_INDEX_OUT_OF_RANGE and a message naming the
// op, the index and the size, on the reference and the cpu backend alike; the same program then
// runs good data again. Never a clamp: before the checks a gather read the nearest end and a
// label out of range hit no class, both silently.
#include <gtest/gtest.h>
#include <stitch/stitch.h>

#include <cstring>
#include <stitch/stitch.hpp>
#include <string>
#include <vector>

#include "api/host_buffer.h"
#include "common/index_check_cases.h"

namespace {

using stitch::apitest::Buffer;
using stitch::apitest::bufferFor;
using stitch::testcases::IndexCase;

// Runs case c on `backend`, its index input holding i % bound, with element `at` set to `bad`
// when `poison`; returns the status and keeps the message in *message.
stitch_status_t runCase(stitch::Program& p, const stitch::Graph& g, const IndexCase& c, bool poison,
                        std::string* message) {
  std::vector<Buffer> in;
  for (size_t i = 0; i < 2; ++i) {
    in.push_back(bufferFor(g, false, i, c.dims));
    if (i == c.input)
      for (int64_t k = 0; k < in.back().numel(); ++k)
        in.back().set(k, static_cast<double>(k % c.bound));
  }
  if (poison) in[c.input].set(c.at, static_cast<double>(c.bad));
  std::vector<Buffer> out{bufferFor(g, true, 0, c.dims)};
  std::vector<DLTensor> inT, outT;
  for (Buffer& b : in) inT.push_back(b.tensor());
  for (Buffer& b : out) outT.push_back(b.tensor());
  stitch_status_t s =
      stitch_program_run(p.get(), inT.data(), inT.size(), outT.data(), outT.size(), nullptr);
  *message = stitch_last_error();
  return s;
}

bool haveBackend(const char* name) {
  stitch_engine_t e = nullptr;
  const char* k[] = {"backend"};
  const char* v[] = {name};
  if (stitch_engine_create(k, v, 1, &e) != STITCH_OK) return false;
  stitch_engine_destroy(e);
  return true;
}

class IndexChecks : public ::testing::TestWithParam<std::string> {};

TEST_P(IndexChecks, AnIndexOutOfRangeFailsTheRunNamingItAndGoodDataRunsAgain) {
  const std::string backend = GetParam();
  if (!haveBackend(backend.c_str())) GTEST_SKIP() << "no " << backend << " backend in this build";
  stitch::Engine e = stitch::Engine::create({{"backend", backend}});
  for (const IndexCase& c : stitch::testcases::indexCases()) {
    SCOPED_TRACE(c.name);
    stitch::Graph g = stitch::Graph::parse(c.text, c.name);
    stitch::Program p = e.compile(g);
    std::string message;
    ASSERT_EQ(runCase(p, g, c, false, &message), STITCH_OK) << message;
    ASSERT_EQ(runCase(p, g, c, true, &message), STITCH_ERROR_INDEX_OUT_OF_RANGE) << message;
    EXPECT_NE(message.find("graph '" + c.name + "': "), std::string::npos) << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
    // The status words are the run's: the next good run is not failed by the last bad one.
    EXPECT_EQ(runCase(p, g, c, false, &message), STITCH_OK) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, IndexChecks, ::testing::Values("reference", "cpu"));

TEST(IndexChecks, StatusNameAndMessageFormat) {
  EXPECT_STREQ(stitch_status_string(STITCH_ERROR_INDEX_OUT_OF_RANGE),
               "STITCH_ERROR_INDEX_OUT_OF_RANGE");
}

}  // namespace
