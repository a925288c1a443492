// The C API through libstitch.so: building, parsing, running, and misuse that must come back as a
// status and a message (never a crash). Also exercises the stitch.hpp wrapper.
#include <gtest/gtest.h>
#include <stitch/stitch.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stitch/stitch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/api_test_helpers.h"
#include "common/env_guard.h"

namespace {

namespace fs = std::filesystem;

using stitch::apitest::f32Tensor;
using stitch::apitest::lastError;

constexpr const char* kSoftmax = R"(
graph sm(x: f32[N, 4]) {
  y = softmax(x, axis=-1)
  return y
}
)";

struct Fixture : ::testing::Test {
  void SetUp() override {
    ASSERT_EQ(stitch_graph_parse(kSoftmax, "sm.stitch", &graph), STITCH_OK) << lastError();
    const char* k[] = {"backend"};
    const char* v[] = {"reference"};
    ASSERT_EQ(stitch_engine_create(k, v, 1, &engine), STITCH_OK) << lastError();
    ASSERT_EQ(stitch_program_compile(engine, graph, &program), STITCH_OK) << lastError();
  }
  void TearDown() override {
    stitch_program_destroy(program);
    stitch_engine_destroy(engine);
    stitch_graph_destroy(graph);
  }
  stitch_graph_t graph = nullptr;
  stitch_engine_t engine = nullptr;
  stitch_program_t program = nullptr;
  float x[8] = {0, 0, 0, 0, 1, 2, 3, 4};
  float y[8] = {};
  int64_t shape[2] = {2, 4};
};

TEST_F(Fixture, RunsSoftmax) {
  DLTensor in = f32Tensor(x, shape, 2), out = f32Tensor(y, shape, 2);
  ASSERT_EQ(stitch_program_run(program, &in, 1, &out, 1, nullptr), STITCH_OK) << lastError();
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y[i], 0.25f);
  double z = std::exp(1) + std::exp(2) + std::exp(3) + std::exp(4);
  EXPECT_NEAR(y[7], std::exp(4) / z, 1e-6);
}

TEST_F(Fixture, OutputShapeBindsSymbols) {
  int64_t s[2] = {5, 4};
  DLTensor in = f32Tensor(nullptr, s, 2);
  int64_t out[2] = {};
  size_t rank = 0;
  ASSERT_EQ(stitch_program_output_shape(program, &in, 1, 0, out, 2, &rank), STITCH_OK);
  EXPECT_EQ(rank, 2u);
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[1], 4);
  EXPECT_EQ(stitch_program_output_shape(program, &in, 1, 1, out, 2, &rank),
            STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("out of range"), std::string::npos);
}

TEST_F(Fixture, MisuseIsAStatusWithAMessage) {
  DLTensor in = f32Tensor(x, shape, 2), out = f32Tensor(y, shape, 2);
  // NULL handles and pointers.
  EXPECT_EQ(stitch_program_run(nullptr, &in, 1, &out, 1, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("program"), std::string::npos);
  EXPECT_EQ(stitch_program_run(program, nullptr, 1, &out, 1, nullptr),
            STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(stitch_program_compile(nullptr, graph, &program), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(stitch_graph_add_op(nullptr, "exp", nullptr, 0, nullptr, 0, nullptr, nullptr),
            STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(stitch_engine_create(nullptr, nullptr, 0, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(stitch_graph_num_inputs(nullptr), 0u);
  EXPECT_EQ(stitch_graph_name(nullptr), nullptr);
  // Wrong input count.
  EXPECT_EQ(stitch_program_run(program, &in, 0, &out, 1, nullptr), STITCH_ERROR_SHAPE_MISMATCH);
  EXPECT_NE(lastError().find("takes 1 inputs, but 0"), std::string::npos) << lastError();
  // Wrong dtype.
  DLTensor bad = in;
  bad.dtype = {kDLFloat, 64, 1};
  EXPECT_EQ(stitch_program_run(program, &bad, 1, &out, 1, nullptr), STITCH_ERROR_SHAPE_MISMATCH);
  EXPECT_NE(lastError().find("f64"), std::string::npos) << lastError();
  bad.dtype = {kDLComplex, 64, 1};
  EXPECT_EQ(stitch_program_run(program, &bad, 1, &out, 1, nullptr), STITCH_ERROR_SHAPE_MISMATCH);
  EXPECT_NE(lastError().find("does not support"), std::string::npos) << lastError();
  // Wrong static dim.
  int64_t wrong[2] = {2, 3};
  bad = f32Tensor(x, wrong, 2);
  EXPECT_EQ(stitch_program_run(program, &bad, 1, &out, 1, nullptr), STITCH_ERROR_SHAPE_MISMATCH);
  EXPECT_NE(lastError().find("dim 1 is 3"), std::string::npos) << lastError();
  // Wrong rank.
  bad = f32Tensor(x, shape, 1);
  EXPECT_EQ(stitch_program_run(program, &bad, 1, &out, 1, nullptr), STITCH_ERROR_SHAPE_MISMATCH);
  // Output of the wrong shape.
  int64_t small[2] = {1, 4};
  DLTensor badOut = f32Tensor(y, small, 2);
  EXPECT_EQ(stitch_program_run(program, &in, 1, &badOut, 1, nullptr), STITCH_ERROR_SHAPE_MISMATCH);
  // Non-contiguous strides are rejected (a transposed view), but size-1 dims may have any stride.
  int64_t strides[2] = {1, 2};
  bad = in;
  bad.strides = strides;
  EXPECT_EQ(stitch_program_run(program, &bad, 1, &out, 1, nullptr), STITCH_ERROR_UNSUPPORTED);
  EXPECT_NE(lastError().find("not compact"), std::string::npos) << lastError();
  int64_t one[2] = {1, 4}, oneStrides[2] = {999, 1};
  float y1[4];
  DLTensor in1 = f32Tensor(x, one, 2), out1 = f32Tensor(y1, one, 2);
  in1.strides = oneStrides;
  EXPECT_EQ(stitch_program_run(program, &in1, 1, &out1, 1, nullptr), STITCH_OK) << lastError();
  // Device memory is not host memory.
  bad = in;
  bad.device = {kDLCUDA, 0};
  EXPECT_EQ(stitch_program_run(program, &bad, 1, &out, 1, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("host memory"), std::string::npos) << lastError();
  // NULL data.
  bad = f32Tensor(nullptr, shape, 2);
  EXPECT_EQ(stitch_program_run(program, &bad, 1, &out, 1, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
}

TEST(CApi, SymbolConflictIsReported) {
  stitch::Graph g =
      stitch::Graph::parse("graph g(a: f32[N], b: f32[N]) {\n  c = add(a, b)\n  return c\n}\n");
  stitch::Engine e = stitch::Engine::create({{"backend", "reference"}});
  stitch::Program p = e.compile(g);
  float a[3] = {1, 2, 3}, b[4] = {1, 2, 3, 4}, c[3];
  int64_t sa[1] = {3}, sb[1] = {4};
  std::vector<DLTensor> in = {f32Tensor(a, sa, 1), f32Tensor(b, sb, 1)};
  std::vector<DLTensor> out = {f32Tensor(c, sa, 1)};
  try {
    p.run(in, out);
    FAIL() << "expected a binding conflict";
  } catch (const stitch::Error& err) {
    EXPECT_EQ(err.status(), STITCH_ERROR_SHAPE_MISMATCH);
    EXPECT_NE(std::string(err.what()).find("symbolic dim N is bound to 3"), std::string::npos)
        << err.what();
  }
}

TEST(CApi, EngineOptionsAndBackends) {
  stitch_engine_t e = nullptr;
  const char* k1[] = {"colour"};
  const char* v1[] = {"blue"};
  EXPECT_EQ(stitch_engine_create(k1, v1, 1, &e), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("valid options: backend, fusion, plan_candidate"), std::string::npos)
      << lastError();
  const char* kc[] = {"plan_candidate"};
  for (const char* bad : {"-1", "65", "two", ""}) {
    const char* vc[] = {bad};
    EXPECT_EQ(stitch_engine_create(kc, vc, 1, &e), STITCH_ERROR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(lastError().find("plan_candidate"), std::string::npos) << lastError();
  }
  const char* k[] = {"backend"};
  const char* bogus[] = {"tpu"};
  EXPECT_EQ(stitch_engine_create(k, bogus, 1, &e), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("auto, cuda, hip, cpu, reference"), std::string::npos);
  for (const char* name : {"cuda", "hip"}) {
    const char* v[] = {name};
    EXPECT_EQ(stitch_engine_create(k, v, 1, &e), STITCH_ERROR_BACKEND_UNAVAILABLE) << name;
    EXPECT_NE(lastError().find(name), std::string::npos);
  }
  EXPECT_EQ(e, nullptr);  // untouched on failure
  ASSERT_EQ(stitch_engine_create(nullptr, nullptr, 0, &e), STITCH_OK);
  // Without a GPU, auto picks cpu, or reference in a build without LLVM.
  stitch_engine_t cpu = nullptr;
  const char* cpuName[] = {"cpu"};
  bool haveCpu = stitch_engine_create(k, cpuName, 1, &cpu) == STITCH_OK;
  stitch_engine_destroy(cpu);
  EXPECT_STREQ(stitch_engine_backend(e), haveCpu ? "cpu" : "reference");
  stitch_engine_destroy(e);
}

TEST(CApi, ExplainPlan) {
  stitch::Graph g = stitch::Graph::parse(kSoftmax);
  std::string text = g.explainPlan({{"target", "sm_80"}}, {{"N", 1024}});
  EXPECT_NE(text.find("target sm_80, 1 kernel"), std::string::npos) << text;
  std::string json = g.explainPlan({{"format", "json"}, {"fusion", "off"}}, {{"N", 8}});
  EXPECT_NE(json.find("\"kernels\""), std::string::npos) << json;
  // Every symbol needs a size; options are checked.
  EXPECT_THROW(g.explainPlan({}, {}), stitch::Error);
  EXPECT_NE(lastError().find("symbolic dim N"), std::string::npos) << lastError();
  EXPECT_THROW(g.explainPlan({{"target", "sm_75"}}, {{"N", 8}}), stitch::Error);
  EXPECT_NE(lastError().find("sm_90, sm_80, gfx90a, host"), std::string::npos) << lastError();
  EXPECT_THROW(g.explainPlan({{"speed", "max"}}, {{"N", 8}}), stitch::Error);
  EXPECT_THROW(g.explainPlan({}, {{"N", -1}}), stitch::Error);
  EXPECT_EQ(stitch_graph_explain_plan(nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0, nullptr, 0,
                                      nullptr),
            STITCH_ERROR_INVALID_ARGUMENT);
}

TEST(CApi, FusionIsAnEngineOption) {
  stitch_engine_t e = nullptr;
  const char* k[] = {"backend", "fusion"};
  const char* v[] = {"reference", "basic"};
  ASSERT_EQ(stitch_engine_create(k, v, 2, &e), STITCH_OK) << lastError();
  stitch_engine_destroy(e);
  const char* bad[] = {"reference", "maximal"};
  EXPECT_EQ(stitch_engine_create(k, bad, 2, &e), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("stitch, basic, off"), std::string::npos) << lastError();
  const char* twice[] = {"backend", "backend"};
  EXPECT_EQ(stitch_engine_create(twice, v, 2, &e), STITCH_ERROR_INVALID_ARGUMENT);
  setenv("STITCH_DUMP", "plan,ptx", 1);
  EXPECT_EQ(stitch_engine_create(nullptr, nullptr, 0, &e), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("valid values: a comma list of plan, source, llvm"), std::string::npos)
      << lastError();
  unsetenv("STITCH_DUMP");
}

// The files in `dir` (a fresh directory), by name, with their text.
std::vector<std::pair<std::string, std::string>> filesIn(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream f(e.path());
    files.emplace_back(e.path().filename().string(),
                       std::string(std::istreambuf_iterator<char>(f), {}));
  }
  return files;
}

// A fresh, empty directory under the system's temporary one.
fs::path freshDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs the softmax graph once, at [2, 4], on an engine made with these options.
void runSoftmaxWith(std::vector<const char*> keys, std::vector<const char*> values) {
  stitch_graph_t g = nullptr;
  stitch_engine_t e = nullptr;
  stitch_program_t p = nullptr;
  ASSERT_EQ(stitch_graph_parse(kSoftmax, "sm.stitch", &g), STITCH_OK) << lastError();
  ASSERT_EQ(stitch_engine_create(keys.data(), values.data(), keys.size(), &e), STITCH_OK)
      << lastError();
  ASSERT_EQ(stitch_program_compile(e, g, &p), STITCH_OK) << lastError();
  float x[8] = {}, y[8] = {};
  int64_t shape[2] = {2, 4};
  DLTensor in = f32Tensor(x, shape, 2), out = f32Tensor(y, shape, 2);
  EXPECT_EQ(stitch_program_run(p, &in, 1, &out, 1, nullptr), STITCH_OK) << lastError();
  stitch_program_destroy(p);
  stitch_engine_destroy(e);
  stitch_graph_destroy(g);
}

// "dump" and "dump_dir" are STITCH_DUMP and STITCH_DUMP_DIR as engine options: each defaults to
// its variable, an explicit option wins, and a bad list fails as the variable does, naming the
// option.
TEST(CApi, DumpIsAnEngineOption) {
  stitch::testing::EnvGuard noDump("STITCH_DUMP", nullptr);
  const fs::path dir = freshDir("stitch_dump_option_test");
  runSoftmaxWith({"backend", "dump", "dump_dir"}, {"reference", "plan", dir.c_str()});
  auto files = filesIn(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(files[0].first.starts_with("sm.") && files[0].first.ends_with(".plan.txt"))
      << files[0].first;
  EXPECT_NE(files[0].second.find("# signature f32[2,4];"), std::string::npos) << files[0].second;

  // The variables are the defaults; each option wins over its own.
  const fs::path envDir = freshDir("stitch_dump_option_env_test");
  const fs::path optionDir = freshDir("stitch_dump_option_dir_test");
  stitch::testing::EnvGuard dump("STITCH_DUMP", "plan");
  stitch::testing::EnvGuard dumpDir("STITCH_DUMP_DIR", envDir.c_str());
  runSoftmaxWith({"backend", "dump"}, {"reference", ""});  // empty: nothing
  EXPECT_TRUE(filesIn(envDir).empty());
  runSoftmaxWith({"backend", "dump_dir"}, {"reference", optionDir.c_str()});
  EXPECT_TRUE(filesIn(envDir).empty());
  EXPECT_EQ(filesIn(optionDir).size(), 1u);
  runSoftmaxWith({"backend"}, {"reference"});
  EXPECT_EQ(filesIn(envDir).size(), 1u);

  stitch_engine_t e = nullptr;
  const char* k[] = {"backend", "dump"};
  const char* ptx[] = {"reference", "plan,ptx"};
  EXPECT_EQ(stitch_engine_create(k, ptx, 2, &e), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError().find("dump=plan,ptx is not valid; valid values: a comma list of plan, "
                             "source, llvm (ptx dumps are not built"),
            0u)
      << lastError();
  const char* asm_[] = {"reference", "plan,asm"};
  EXPECT_EQ(stitch_engine_create(k, asm_, 2, &e), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError().find("dump=plan,asm is not valid"), 0u) << lastError();
  EXPECT_NE(lastError().find("('asm' is none of them)"), std::string::npos) << lastError();
  EXPECT_EQ(e, nullptr);
  for (const fs::path& d : {dir, envDir, optionDir}) fs::remove_all(d);
}

TEST(CApi, EnvironmentToggles) {
  stitch_engine_t e = nullptr;
  setenv("STITCH_BACKEND", "warp-drive", 1);
  EXPECT_EQ(stitch_engine_create(nullptr, nullptr, 0, &e), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("STITCH_BACKEND=warp-drive"), std::string::npos) << lastError();
  setenv("STITCH_BACKEND", "cuda", 1);
  EXPECT_EQ(stitch_engine_create(nullptr, nullptr, 0, &e), STITCH_ERROR_BACKEND_UNAVAILABLE);
  // An explicit option wins over the environment.
  const char* k[] = {"backend"};
  const char* v[] = {"reference"};
  EXPECT_EQ(stitch_engine_create(k, v, 1, &e), STITCH_OK);
  stitch_engine_destroy(e);
  unsetenv("STITCH_BACKEND");
  setenv("STITCH_LOG_LEVEL", "loud", 1);
  EXPECT_EQ(stitch_engine_create(nullptr, nullptr, 0, &e), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("trace, debug, info, warn, error, critical, off"), std::string::npos);
  unsetenv("STITCH_LOG_LEVEL");
}

TEST(CApi, BuildOpByOpWithAttributes) {
  stitch::Graph g = stitch::Graph::create("ln");
  stitch_value_t x = g.addInput("x", STITCH_F32, {{0, "N"}, {8, ""}});
  stitch_value_t gm = g.addInput("gamma", STITCH_F32, {{8, ""}});
  stitch_value_t bt = g.addInput("beta", STITCH_F32, {{8, ""}});
  stitch_attr_t eps{};
  eps.name = "eps";
  eps.kind = STITCH_ATTR_FLOAT;
  eps.f = 1e-5;
  stitch_value_t y = g.addOp("layer_norm", {x, gm, bt}, {eps}, "y");
  int64_t axes[] = {-1};
  stitch_attr_t ax{};
  ax.name = "axes";
  ax.kind = STITCH_ATTR_INTS;
  ax.ints = axes;
  ax.count = 1;
  stitch_value_t s = g.addOp("reduce_sum", {y}, {ax});
  g.setOutputs({y, s});
  EXPECT_EQ(g.numOps(), 2u);
  EXPECT_EQ(g.output(1).dims.size(), 1u);
  EXPECT_EQ(g.output(1).dims[0].symbol, "N");
  // The printed text parses back to a graph that prints the same.
  std::string text = g.print();
  EXPECT_EQ(stitch::Graph::parse(text).print(), text);
  EXPECT_NE(text.find("layer_norm(x, gamma, beta"), std::string::npos) << text;
  // Errors name the op and the problem.
  try {
    g.addOp("add", {x, s});
    FAIL();
  } catch (const stitch::Error& e) {
    EXPECT_EQ(e.status(), STITCH_ERROR_INVALID_GRAPH);
    EXPECT_NE(std::string(e.what()).find("do not broadcast"), std::string::npos) << e.what();
  }
  stitch_attr_t wrongKind{};
  wrongKind.name = "axes";
  wrongKind.kind = STITCH_ATTR_BOOL;
  EXPECT_THROW(g.addOp("reduce_sum", {y}, {wrongKind}), stitch::Error);
  EXPECT_THROW(g.addOp("exp", {12345}), stitch::Error);
  EXPECT_THROW(g.addInput("x", STITCH_F32, {}), stitch::Error);  // duplicate name
  EXPECT_THROW(g.addInput("z", static_cast<stitch_dtype_t>(42), {}), stitch::Error);
}

// Rotary embeddings as exporters write them: halves sliced off a symbolic axis with ends of
// 2^31 - 1 ("to the end", clamped to the axis), rotated and concatenated. Built op by op, run
// on the reference and the cpu backend; an end inside a symbolic axis is refused with the attribute
// named, and a size past a written end is refused when the symbol is bound.
TEST(CApi, SliceOfASymbolicAxisEndsPastIt) {
  stitch::Graph g = stitch::Graph::create("rope");
  stitch_value_t x = g.addInput("x", STITCH_F32, {{0, "T"}, {4, ""}});
  auto ints = [](const char* name, const std::vector<int64_t>& v) {
    stitch_attr_t a{};
    a.name = name;
    a.kind = STITCH_ATTR_INTS;
    a.ints = v.data();
    a.count = v.size();
    return a;
  };
  const std::vector<int64_t> zero{0, 0}, mid{0, 2}, half{2147483647, 2}, end{2147483647, 4};
  stitch_value_t x1 = g.addOp("slice", {x}, {ints("starts", zero), ints("ends", half)}, "x1");
  stitch_value_t x2 = g.addOp("slice", {x}, {ints("starts", mid), ints("ends", end)}, "x2");
  stitch_value_t n2 = g.addOp("neg", {x2}, {}, "n2");
  stitch_attr_t axis{};
  axis.name = "axis";
  axis.kind = STITCH_ATTR_INT;
  axis.i = 1;
  stitch_value_t y = g.addOp("concat", {n2, x1}, {axis}, "y");
  g.setOutputs({y});
  EXPECT_EQ(g.output(0).dims[0].symbol, "T");
  EXPECT_NE(g.print().find("ends=[2147483647, 2]"), std::string::npos) << g.print();
  float in[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  int64_t shape[2] = {3, 4};
  for (const char* backend : {"reference", "cpu"}) {
    SCOPED_TRACE(backend);
    stitch_engine_t engine = nullptr;
    const char* k[] = {"backend"};
    const char* v[] = {backend};
    stitch_status_t st = stitch_engine_create(k, v, 1, &engine);
    if (st == STITCH_ERROR_BACKEND_UNAVAILABLE) continue;  // a build without LLVM
    ASSERT_EQ(st, STITCH_OK) << lastError();
    stitch_program_t program = nullptr;
    ASSERT_EQ(stitch_program_compile(engine, g.get(), &program), STITCH_OK) << lastError();
    float out[12] = {};
    DLTensor a = f32Tensor(in, shape, 2), b = f32Tensor(out, shape, 2);
    ASSERT_EQ(stitch_program_run(program, &a, 1, &b, 1, nullptr), STITCH_OK) << lastError();
    const float want[12] = {-3, -4, 1, 2, -7, -8, 5, 6, -11, -12, 9, 10};
    for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], want[i]) << i;
    // T = 2^31 is past the written end: the query binds T and says so, allocating nothing.
    int64_t big[2] = {int64_t{1} << 31, 4}, dims[2] = {};
    size_t rank = 0;
    DLTensor q = f32Tensor(nullptr, big, 2);
    EXPECT_EQ(stitch_program_output_shape(program, &q, 1, 0, dims, 2, &rank),
              STITCH_ERROR_SHAPE_MISMATCH);
    EXPECT_NE(lastError().find("slice 'x1' takes axis 0 of 'x' (f32[T, 4]) to its end, written "
                               "as 2147483647, but T=2147483648 is longer"),
              std::string::npos)
        << lastError();
    stitch_program_destroy(program);
    stitch_engine_destroy(engine);
  }
  // An end inside the symbolic axis would make the result's size an expression of T.
  const std::vector<int64_t> inside{100, 4};
  stitch_value_t out = -1;
  stitch_attr_t bad[] = {ints("starts", zero), ints("ends", inside)};
  EXPECT_EQ(stitch_graph_add_op(g.get(), "slice", &x, 1, bad, 2, "z", &out),
            STITCH_ERROR_INVALID_GRAPH);
  EXPECT_NE(lastError().find("slice along symbolic dim T (axis 0) must take the whole axis (end "
                             "100 here): start 0, step 1 and an end of at least 2147483647"),
            std::string::npos)
      << lastError();
}

TEST(CApi, GraphWithoutOutputsDoesNotCompile) {
  stitch::Graph g = stitch::Graph::create("g");
  g.addInput("x", STITCH_F32, {{2, ""}});
  EXPECT_THROW(g.verify(), stitch::Error);
  stitch::Engine e = stitch::Engine::create({{"backend", "reference"}});
  try {
    e.compile(g);
    FAIL();
  } catch (const stitch::Error& err) {
    EXPECT_EQ(err.status(), STITCH_ERROR_INVALID_GRAPH);
    EXPECT_NE(std::string(err.what()).find("no outputs"), std::string::npos) << err.what();
  }
}

TEST(CApi, ModulesHoldSeveralGraphs) {
  const char* text =
      "graph a(x: f32[2]) {\n  y = exp(x)\n  return y\n}\n"
      "graph b(x: i32[2]) {\n  y = neg(x)\n  return y\n}\n";
  stitch::Module m = stitch::Module::parse(text, "two.stitch");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.graph(1).name(), "b");
  EXPECT_TRUE(static_cast<bool>(m.find("a")));
  EXPECT_FALSE(static_cast<bool>(m.find("c")));
  EXPECT_EQ(stitch_module_graph(m.get(), 2), nullptr);
  // Destroying a borrowed graph is ignored rather than corrupting the module.
  stitch_graph_destroy(stitch_module_graph(m.get(), 0));
  EXPECT_EQ(m.graph(0).name(), "a");
  stitch_module_t bad = nullptr;
  EXPECT_EQ(stitch_module_parse_file("/nonexistent/x.stitch", &bad), STITCH_ERROR_IO);
  EXPECT_NE(lastError().find("/nonexistent/x.stitch"), std::string::npos);
  // stitch_graph_parse wants exactly one graph.
  stitch_graph_t g = nullptr;
  EXPECT_EQ(stitch_graph_parse(text, "two.stitch", &g), STITCH_ERROR_PARSE);
  EXPECT_EQ(g, nullptr);
}

TEST(CApi, PrintTruncatesSafely) {
  stitch::Graph g = stitch::Graph::parse(kSoftmax);
  size_t needed = 0;
  char buf[8];
  ASSERT_EQ(stitch_graph_print(g.get(), buf, sizeof buf, &needed), STITCH_OK);
  EXPECT_GT(needed, sizeof buf);
  EXPECT_EQ(std::string(buf), g.print().substr(0, 7));
}

// A C caller may put any integer in an enum field or argument. Found by tests/fuzz/fuzz_capi:
// a dtype attribute of 2^32 - 1 was cast to stitch_dtype_t, undefined in C++ (UBSan), and the
// error named -1. Each such value is a status naming the integer given.
TEST(CApi, OutOfRangeEnumsAreRejectedByValue) {
  stitch_graph_t g = nullptr;
  ASSERT_EQ(stitch_graph_create("g", &g), STITCH_OK);
  stitch_dim_t dims[1] = {{4, nullptr}};
  stitch_value_t x = -1, y = -1;
  ASSERT_EQ(stitch_graph_add_input(g, "x", STITCH_F32, dims, 1, &x), STITCH_OK) << lastError();

  stitch_attr_t to{};
  to.name = "to";
  to.kind = STITCH_ATTR_DTYPE;
  to.i = 4294967295;
  EXPECT_EQ(stitch_graph_add_op(g, "cast", &x, 1, &to, 1, nullptr, &y),
            STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("4294967295 is not a valid stitch_dtype_t"), std::string::npos)
      << lastError();

  // Out-of-range values stored in the enum objects themselves, as C allows.
  const int raw = 1000;
  stitch_attr_t bad{};
  bad.name = "to";
  std::memcpy(&bad.kind, &raw, sizeof raw);
  EXPECT_EQ(stitch_graph_add_op(g, "cast", &x, 1, &bad, 1, nullptr, &y),
            STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("invalid kind 1000"), std::string::npos) << lastError();
  stitch_dtype_t dtype;
  std::memcpy(&dtype, &raw, sizeof raw);
  EXPECT_EQ(stitch_graph_add_input(g, "z", dtype, dims, 1, &y), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("1000 is not a valid stitch_dtype_t"), std::string::npos)
      << lastError();
  EXPECT_EQ(stitch_graph_num_ops(g), 0u);
  stitch_graph_destroy(g);
}

TEST(CApi, ProgramsRunFromSeveralThreads) {
  stitch::Graph g = stitch::Graph::parse(kSoftmax);
  stitch::Engine e = stitch::Engine::create({{"backend", "reference"}});
  stitch::Program p = e.compile(g);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<float> x(64 * 4, static_cast<float>(t)), y(64 * 4);
      int64_t s[2] = {64, 4};
      std::vector<DLTensor> in = {f32Tensor(x.data(), s, 2)}, out = {f32Tensor(y.data(), s, 2)};
      for (int k = 0; k < 20; ++k) p.run(in, out);
      ok[t] = y[0] == 0.25f && y[255] == 0.25f;
    });
  for (auto& th : threads) th.join();
  for (int v : ok) EXPECT_TRUE(v);
}

TEST(CApi, LastErrorIsPerThread) {
  stitch_engine_t e = nullptr;
  const char* k[] = {"nope"};
  const char* v[] = {"x"};
  ASSERT_NE(stitch_engine_create(k, v, 1, &e), STITCH_OK);
  std::string other;
  std::thread([&] { other = stitch_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(lastError(), "");
}

}  // namespace
