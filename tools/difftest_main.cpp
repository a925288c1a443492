// stitch-difftest: random differential testing of the backends against the reference interpreter.
//
//   stitch-difftest [--backend cpu|cuda|hip|all] [--count N] [--seed S] [--fusion M] [--out DIR]
//                   [--quiet]
//
// For each seed S, S+1, ..., S+N-1 it makes the random graph of that seed (difftest_graphs.h),
// gives it inputs exactly as `stitch run --seed SEED` does (fillRandom, seeded by the graph's
// seed), runs it on each backend asked for and on the reference backend through the public API,
// and compares every output as `stitch run --check` does (compare.h, DESIGN.md's tolerances).
// A failing seed (a mismatch, or any error from parsing to running) is written to
// DIR/random_SEED.stitch with the exact `stitch run` command that reproduces it; one summary line
// per backend ends the output.
//
// Decisions: `all` means every backend this build and machine have (cpu, cuda, hip), skipping the
// unavailable ones with a note; a backend named explicitly that is unavailable is an error
// (exit 3), as for `stitch run`. The reference backend is the oracle, so it is never a target.
// Exit codes follow the command line's: 0 every graph matched, 1 some seed failed, 2 usage,
// 3 backend unavailable.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stitch/stitch.hpp>
#include <string>
#include <vector>

#include "compare.h"
#include "difftest_graphs.h"
#include "host_tensor.h"

namespace stitch::cli {
namespace {

struct Options {
  std::vector<std::string> backends{"cpu"};
  bool all = false;
  uint64_t count = 100;
  uint64_t seed = 1;
  std::string fusion;  // empty: the engine's default ($STITCH_FUSION, else stitch)
  std::string out = "difftest-failures";
  bool quiet = false;
};

struct UsageError {
  std::string message;
};

constexpr const char* kUsage =
    "usage: stitch-difftest [--backend cpu|cuda|hip|all] [--count N] [--seed S]\n"
    "                       [--fusion stitch|basic|off] [--out DIR] [--quiet]\n";

uint64_t parseCount(const std::string& s, const char* flag) {
  size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size() || s[0] == '-')
    throw UsageError{fmt::format("{} wants a non-negative integer, got '{}'", flag, s)};
  return v;
}

Options parseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{fmt::format("{} needs a value", a)};
      return argv[++i];
    };
    if (a == "--backend") {
      std::string b = value();
      if (b == "all") {
        o.all = true;
        o.backends = {"cpu", "cuda", "hip"};
      } else if (b == "cpu" || b == "cuda" || b == "hip") {
        o.all = false;
        o.backends = {b};
      } else {
        throw UsageError{fmt::format("unknown backend '{}' (cpu, cuda, hip, all)", b)};
      }
    } else if (a == "--count") {
      o.count = parseCount(value(), "--count");
    } else if (a == "--seed") {
      o.seed = parseCount(value(), "--seed");
    } else if (a == "--fusion") {
      o.fusion = value();
      if (o.fusion != "stitch" && o.fusion != "basic" && o.fusion != "off")
        throw UsageError{fmt::format("unknown fusion mode '{}' (stitch, basic, off)", o.fusion)};
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      throw UsageError{fmt::format("unknown argument '{}'", a)};
    }
  }
  return o;
}

// Runs g on engine with the given host inputs and returns its outputs on the host (inputs and
// outputs staged in device memory on a GPU backend, as `stitch run` does).
std::vector<HostTensor> runOn(const Engine& engine, const Graph& g,
                              std::vector<HostTensor>& inputs) {
  Program p = engine.compile(g);
  const bool host = engine.device().device_type == kDLCPU;
  std::vector<DeviceBuffer> buffers;
  auto viewOf = [&](HostTensor& t, bool copyIn) {
    DLTensor v = t.view();
    if (!host) {
      buffers.emplace_back(engine, t.bytes.size());
      if (copyIn)
        engine.copy(buffers.back().get(), t.bytes.data(), t.bytes.size(),
                    STITCH_COPY_HOST_TO_DEVICE);
      v.data = buffers.back().get();
      v.device = engine.device();
    }
    return v;
  };
  std::vector<DLTensor> in;
  for (HostTensor& t : inputs) in.push_back(viewOf(t, true));
  std::vector<HostTensor> outputs;
  for (size_t i = 0; i < p.numOutputs(); ++i)
    outputs.emplace_back(g.output(i).dtype, p.outputShape(in, i));
  const size_t firstOut = buffers.size();
  std::vector<DLTensor> out;
  for (HostTensor& t : outputs) out.push_back(viewOf(t, false));
  p.run(in, out);
  engine.synchronize();
  if (!host)
    for (size_t i = 0; i < outputs.size(); ++i)
      engine.copy(outputs[i].bytes.data(), buffers[firstOut + i].get(), outputs[i].bytes.size(),
                  STITCH_COPY_DEVICE_TO_HOST);
  return outputs;
}

// Empty when the graph matches the reference on engine; otherwise what went wrong.
std::string checkOne(const Engine& engine, const Engine& reference, const difftest::RandomCase& c,
                     uint64_t seed) {
  try {
    Graph g = Graph::parse(c.text, c.name + ".stitch");
    std::vector<HostTensor> inputs;
    for (size_t i = 0; i < g.numInputs(); ++i) {
      ValueInfo info = g.input(i);
      std::vector<int64_t> shape;
      for (const Dim& d : info.dims)
        shape.push_back(d.symbol.empty() ? d.size : c.dims.at(d.symbol));
      inputs.emplace_back(info.dtype, shape);
      fillRandom(inputs.back(), seed, i);
    }
    std::vector<HostTensor> want = runOn(reference, g, inputs);
    std::vector<HostTensor> got = runOn(engine, g, inputs);
    std::string problems;
    for (size_t i = 0; i < got.size(); ++i) {
      CompareResult r = compare(got[i], want[i]);
      if (!r.ok())
        problems += fmt::format("output {}: {}\n", g.output(i).name, r.describe(got[i], want[i]));
    }
    return problems;
  } catch (const Error& e) {
    return fmt::format("error: {}\n", e.what());
  } catch (const std::exception& e) {
    return fmt::format("error: {}\n", e.what());
  }
}

// Writes the failing graph and returns the command that reproduces the failure.
std::string writeReproducer(const Options& o, const std::string& backend,
                            const difftest::RandomCase& c, uint64_t seed) {
  std::filesystem::create_directories(o.out);
  const std::string file = (std::filesystem::path(o.out) / (c.name + ".stitch")).string();
  std::ofstream(file) << c.text;
  std::string cmd = o.fusion.empty() ? "" : fmt::format("STITCH_FUSION={} ", o.fusion);
  cmd += fmt::format("stitch run {}", file);
  for (const auto& [symbol, size] : c.dims) cmd += fmt::format(" --dim {}={}", symbol, size);
  cmd += fmt::format(" --backend {} --check --seed {}", backend, seed);
  return cmd;
}

int run(const Options& o) {
  Engine reference = Engine::create({{"backend", "reference"}});
  struct Target {
    std::string name;
    Engine engine;
    uint64_t ok = 0, failed = 0;
  };
  std::vector<Target> targets;
  for (const std::string& b : o.backends) {
    std::map<std::string, std::string> opts{{"backend", b}};
    if (!o.fusion.empty()) opts["fusion"] = o.fusion;
    try {
      targets.push_back({b, Engine(opts)});
    } catch (const Error& e) {
      if (!o.all || e.status() != STITCH_ERROR_BACKEND_UNAVAILABLE) {
        fmt::print(stderr, "stitch-difftest: backend {}: {}\n", b, e.what());
        return e.status() == STITCH_ERROR_BACKEND_UNAVAILABLE ? 3 : 2;
      }
      fmt::print("note: backend {} skipped: {}\n", b, e.what());
    }
  }
  if (targets.empty()) {
    fmt::print(stderr, "stitch-difftest: no backend available\n");
    return 3;
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t k = 0; k < o.count; ++k) {
    const uint64_t seed = o.seed + k;
    difftest::RandomCase c = difftest::randomCase(seed);
    for (Target& t : targets) {
      std::string problem = checkOne(t.engine, reference, c, seed);
      if (problem.empty()) {
        ++t.ok;
        continue;
      }
      ++t.failed;
      fmt::print("FAIL seed {} backend {}:\n{}  reproduce: {}\n", seed, t.name, problem,
                 writeReproducer(o, t.name, c, seed));
      std::fflush(stdout);
    }
    if (!o.quiet && (k + 1) % 100 == 0) {
      fmt::print(stderr, "stitch-difftest: {} of {} graphs\n", k + 1, o.count);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool allOk = true;
  for (const Target& t : targets) {
    fmt::print(
        "difftest {}: {} graphs (seeds {}..{}), {} match the reference, {} failed ({:.1f} s)\n",
        t.name, o.count, o.seed, o.seed + o.count - (o.count > 0 ? 1 : 0), t.ok, t.failed, seconds);
    allOk = allOk && t.failed == 0;
  }
  return allOk ? 0 : 1;
}

}  // namespace
}  // namespace stitch::cli

int main(int argc, char** argv) {
  using namespace stitch::cli;
  try {
    return run(parseArgs(argc, argv));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "stitch-difftest: %s\n%s", e.message.c_str(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stitch-difftest: internal error: %s\n", e.what());
    return 5;
  }
}
