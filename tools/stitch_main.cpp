// The `stitch` command line: run graphs from .stitch files, check them against the reference
// interpreter, and demo the library on a transformer layer's memory-bound parts.
//
//   stitch run FILE [--graph NAME] [--dim SYM=N ...] [--backend B] [--check] [--seed S] [--iters K]
//                   [--plan-candidate K]
//   stitch plan FILE [--graph NAME] [--dim SYM=N ...] [--target T] [--fusion M] [--format F]
//                    [--plan-candidate K] [--backend B] [--explain]
//   stitch codegen FILE [--graph NAME] [--dim SYM=N ...] [--target T] [--fusion M] [--emit E]
//                       [--plan-candidate K]
//   stitch demo [--backend B] [--iters K]
//   stitch cache stats|clear|prune
//   stitch tune fit [--backend B] [--hold-back PERCENT] [--dry-run] [--force]
//
// Exit codes (DESIGN.md): 0 ok; 1 --check mismatch; 2 invalid input (parse, type, shape, unknown
// option, a shape too large for the limits or the machine's memory, an index out of range: a
// gather of a seeded integer input in [-8, 8] along an axis shorter than 9, say); 3 backend
// unavailable; 4 compile failure; 5 internal error.
//
// Decisions where DESIGN.md is silent: without --graph, `run` runs every graph of the file in
// order. A symbolic dim not given with --dim takes a default of 16, and a note says so, so every
// example runs as written; --dim for a symbol that no selected graph has is an error. On a GPU
// backend `run` stages the seeded host inputs in device memory, and --iters times batches of up
// to 10 back-to-back runs, each ended by one synchronize (see runGraph). --plan-candidate K runs
// (plans, compiles) the planner's K-th next best plan instead of its pick: bench/gpu/run.py
// measures alternative plans with it to check the cost model's ranking on the hardware.
// `plan --backend B` plans for that backend's own machine instead of a --target profile, and says
// where the plan comes from: the decision of an autotuning entry in the kernel cache for this
// machine (STITCH_AUTOTUNE=1 on a run makes one), with each candidate's measured time, or the
// cost model's pick. `--explain` asks for the text format, which is already the default: the
// explanation.
// `stitch cache` acts on the kernel cache's directory the environment names (STITCH_CACHE_DIR,
// else $XDG_CACHE_HOME/stitch or ~/.cache/stitch): `stats` prints what it holds against its limit
// (STITCH_CACHE_MAX_MB), `clear` removes every entry, `prune` removes stale temporary files and
// corrupt entries (a tag that does not verify included) and evicts the least recently used past
// the limit. With STITCH_CACHE=0 there is no directory to act on: exit 2; a file prune or clear
// cannot remove (a read-only directory) is exit 2 too, with its name, after the rest is done.
// `stitch tune fit` fits the cost model of the backend's machine to the plans autotuning measured
// there (STITCH_AUTOTUNE=1 runs leave them in the cache directory) and stores the calibration the
// backend plans with from then on (stitch_tune_fit; runtime/cost_calibration.h); too few measured
// plans is exit 2, saying how to record them. A fit whose model picks worse than the profile's is
// reported and not stored, unless --force.
// Every command first checks the STITCH_* environment (stitch_environment_check): a bad value of
// any variable exits 2, its message on stderr.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <stitch/stitch.hpp>
#include <string>
#include <vector>

#include "compare.h"
#include "demo_graphs.h"
#include "host_tensor.h"

namespace stitch::cli {
namespace {

constexpr int64_t kDefaultDim = 16;

enum Exit { kOk = 0, kMismatch = 1, kInvalid = 2, kUnavailable = 3, kCompile = 4, kInternal = 5 };

int exitCodeFor(stitch_status_t s) {
  switch (s) {
    case STITCH_OK: return kOk;
    case STITCH_ERROR_BACKEND_UNAVAILABLE: return kUnavailable;
    case STITCH_ERROR_COMPILE: return kCompile;
    case STITCH_ERROR_INTERNAL: return kInternal;
    // A shape too large for this machine's memory is the input's problem (README, "Sizes").
    case STITCH_ERROR_OUT_OF_MEMORY:
    case STITCH_ERROR_INVALID_ARGUMENT:
    case STITCH_ERROR_PARSE:
    case STITCH_ERROR_INVALID_GRAPH:
    case STITCH_ERROR_SHAPE_MISMATCH:
    case STITCH_ERROR_UNSUPPORTED:
    case STITCH_ERROR_IO:
    // An index outside its range in the (seeded) inputs: the data's problem.
    case STITCH_ERROR_INDEX_OUT_OF_RANGE: return kInvalid;
  }
  return kInternal;
}

// A command-line mistake: printed with the usage, exit 2.
struct UsageError {
  std::string message;
};

const char* kUsage =
    "usage: stitch run FILE [--graph NAME] [--dim SYM=N ...] [--backend B] [--check] [--seed S]\n"
    "                       [--iters K] [--plan-candidate K]\n"
    "       stitch plan FILE [--graph NAME] [--dim SYM=N ...] [--target sm_90|sm_80|gfx90a|host]\n"
    "                        [--fusion stitch|basic|off] [--format text|dot|json]\n"
    "                        [--plan-candidate K] [--backend B] [--explain]\n"
    "       stitch codegen FILE [--graph NAME] [--dim SYM=N ...] [--target "
    "sm_90|sm_80|gfx90a|host]\n"
    "                           [--fusion stitch|basic|off] [--emit report|source]\n"
    "                           [--plan-candidate K]\n"
    "--plan-candidate K: the planner's K-th next best plan instead of its pick (0)\n"
    "       stitch demo [--backend B] [--iters K]\n"
    "       stitch cache stats|clear|prune   (the kernel cache's directory: see README)\n"
    "       stitch tune fit [--backend B] [--hold-back PERCENT] [--dry-run] [--force]\n"
    "                       (fit the cost model to the plans STITCH_AUTOTUNE=1 runs measured)\n"
    "       stitch --version | --help\n"
    "backends: auto (default), cuda, hip, cpu, reference\n";

struct Options {
  std::string file;
  std::string graph;
  std::map<std::string, int64_t> dims;
  std::optional<std::string> backend;
  std::map<std::string, std::string> planOptions;  // target, fusion, format, emit
  std::optional<std::string> planCandidate;        // --plan-candidate (every command but demo)
  bool check = false;
  uint64_t seed = 0;
  int iters = 0;
};

int64_t parseInt(const std::string& text, const std::string& what, int64_t lo) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < lo)
    throw UsageError{fmt::format("{} must be an integer >= {}, got '{}'", what, lo, text)};
  return v;
}

Options parseOptions(const std::vector<std::string>& args, bool wantFile) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value", a)};
      return args[++i];
    };
    if (a == "--graph") o.graph = value();
    else if (a == "--backend") o.backend = value();
    else if (a == "--check") o.check = true;
    else if (a == "--explain") o.planOptions["format"] = "text";
    else if (a == "--target" || a == "--fusion" || a == "--format" || a == "--emit")
      o.planOptions[a.substr(2)] = value();
    else if (a == "--plan-candidate") o.planCandidate = value();
    else if (a == "--seed") o.seed = static_cast<uint64_t>(parseInt(value(), "--seed", 0));
    else if (a == "--iters") o.iters = static_cast<int>(parseInt(value(), "--iters", 1));
    else if (a == "--dim") {
      const std::string& d = value();
      size_t eq = d.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError{fmt::format("--dim takes SYM=N, got '{}'", d)};
      o.dims[d.substr(0, eq)] = parseInt(d.substr(eq + 1), "--dim " + d.substr(0, eq), 0);
    } else if (a.size() > 1 && a[0] == '-') {
      throw UsageError{fmt::format("unknown option '{}'", a)};
    } else if (wantFile && o.file.empty()) {
      o.file = a;
    } else {
      throw UsageError{fmt::format("unexpected argument '{}'", a)};
    }
  }
  if (wantFile && o.file.empty()) throw UsageError{"run needs a FILE"};
  return o;
}

Engine makeEngine(const std::optional<std::string>& backend,
                  const std::optional<std::string>& planCandidate = std::nullopt) {
  std::map<std::string, std::string> opts;
  if (backend) opts["backend"] = *backend;
  if (planCandidate) opts["plan_candidate"] = *planCandidate;
  return Engine(opts);
}

// The result of running one graph: its outputs, for checking.
struct RunResult {
  std::vector<HostTensor> outputs;
  std::vector<double> timesMs;
  std::vector<double> callMs;  // the run call alone: host time until the work is queued
  double firstMs = 0;          // the first run: planning, kernels made, one run
  uint64_t compiled = 0;       // kernels compiled by the first run
  uint64_t fromDisk = 0;       // entries the first run loaded from the disk cache
  uint64_t fromRemote = 0;     // ... from the remote cache (STITCH_REMOTE_CACHE)
  std::string plan;            // where the first run's plan came from
};

// Seeded inputs for g, with symbols bound from dims (defaults noted on stdout).
std::vector<HostTensor> makeInputs(const Graph& g, const std::map<std::string, int64_t>& dims,
                                   uint64_t seed, std::set<std::string>& defaulted) {
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < g.numInputs(); ++i) {
    ValueInfo info = g.input(i);
    std::vector<int64_t> shape;
    for (const Dim& d : info.dims) {
      if (d.symbol.empty()) {
        shape.push_back(d.size);
        continue;
      }
      auto it = dims.find(d.symbol);
      if (it != dims.end()) {
        shape.push_back(it->second);
      } else {
        shape.push_back(kDefaultDim);
        defaulted.insert(d.symbol);
      }
    }
    inputs.emplace_back(info.dtype, shape, fmt::format("input '{}'", info.name));
    fillRandom(inputs.back(), seed, i);
  }
  return inputs;
}

// Host tensors mirrored on the engine's device (no copies on the host backends, whose device
// memory is the host tensors themselves).
struct Staged {
  std::vector<DeviceBuffer> buffers;
  std::vector<DLTensor> views;
};

Staged stage(const Engine& engine, std::vector<HostTensor>& tensors, bool copyIn) {
  Staged s;
  DLDevice dev = engine.device();
  for (HostTensor& t : tensors) {
    DLTensor v = t.view();
    if (dev.device_type != kDLCPU) {
      s.buffers.emplace_back(engine, t.bytes.size());
      if (copyIn)
        engine.copy(s.buffers.back().get(), t.bytes.data(), t.bytes.size(),
                    STITCH_COPY_HOST_TO_DEVICE);
      v.data = s.buffers.back().get();
      v.device = dev;
    }
    s.views.push_back(v);
  }
  return s;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

RunResult runGraph(const Engine& engine, const Graph& g, std::vector<HostTensor>& inputs,
                   int iters) {
  Program p = engine.compile(g);
  Staged in = stage(engine, inputs, /*copyIn=*/true);
  RunResult r;
  for (size_t i = 0; i < p.numOutputs(); ++i)
    r.outputs.emplace_back(g.output(i).dtype, p.outputShape(in.views, i),
                           fmt::format("output '{}'", g.output(i).name));
  Staged out = stage(engine, r.outputs, /*copyIn=*/false);
  // The first run also plans the signature and makes its kernels: timed apart, not in --iters.
  stitch_cache_stats_t before = engine.cacheStats();
  auto f0 = std::chrono::steady_clock::now();
  p.run(in.views, out.views);
  engine.synchronize();
  r.firstMs = msSince(f0);
  stitch_cache_stats_t after = engine.cacheStats();
  r.compiled = after.compiles - before.compiles;
  r.fromDisk = after.disk_hits - before.disk_hits;
  r.fromRemote = after.remote_hits - before.remote_hits;
  const stitch_program_stats_t s = p.stats();
  const stitch_program_tuning_t t = p.tuning();
  const char* choice = t.switched ? "not the cost model's pick" : "the cost model's pick";
  r.plan =
      t.from_entries ? fmt::format("the tuning entry's decision, {} (nothing measured)", choice)
      : t.measured && t.single_plan ? std::string("searched; one candidate plan, nothing to tune")
      : t.measured    ? fmt::format("autotuned in {:.4g} ms, {}", t.seconds * 1e3, choice)
      : s.warm_starts ? std::string("the program cache (no planning)")
      : s.plan_reuses ? std::string("its shape class's kept plan")
                      : std::string("searched");
  // On a GPU, runs are queued in batches of up to kBatch with one synchronize per batch, and each
  // batch gives a sample of its mean time per run: launches overlap the previous run as in a
  // training loop, and the synchronize's latency is not counted once per run.
  constexpr int kBatch = 10;
  bool host = engine.device().device_type == kDLCPU;
  for (int k = 0; k < iters;) {
    int n = host ? 1 : std::min(kBatch, iters - k);
    auto t0 = std::chrono::steady_clock::now();
    for (int j = 0; j < n; ++j) {
      auto c0 = std::chrono::steady_clock::now();
      p.run(in.views, out.views);
      r.callMs.push_back(msSince(c0));
    }
    engine.synchronize();
    double ms = msSince(t0) / n;
    for (int j = 0; j < n; ++j) r.timesMs.push_back(ms);
    k += n;
  }
  for (size_t i = 0; i < out.buffers.size(); ++i)
    engine.copy(r.outputs[i].bytes.data(), out.buffers[i].get(), r.outputs[i].bytes.size(),
                STITCH_COPY_DEVICE_TO_HOST);
  return r;
}

double median(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
}

std::string timingLine(const std::vector<double>& ms) {
  return fmt::format("time: median {:.4g} ms, min {:.4g} ms over {} runs", median(ms),
                     *std::min_element(ms.begin(), ms.end()), ms.size());
}

// Runs one graph, prints its outputs, checks and times it; returns false on a check mismatch.
bool runOne(const Engine& engine, const Graph& g, const Options& o) {
  std::set<std::string> defaulted;
  std::vector<HostTensor> inputs = makeInputs(g, o.dims, o.seed, defaulted);
  for (const std::string& s : defaulted)
    fmt::print("note: symbolic dim {} = {} (default; set it with --dim {}=N)\n", s, kDefaultDim, s);
  fmt::print("graph {}: {} ops, {} inputs, {} outputs, backend {}\n", g.name(), g.numOps(),
             g.numInputs(), g.numOutputs(), engine.backend());
  RunResult r = runGraph(engine, g, inputs, o.iters);
  bool ok = true;
  std::optional<RunResult> want;
  if (o.check) {
    Engine ref = makeEngine(std::string("reference"));
    want = runGraph(ref, g, inputs, 0);
  }
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    const HostTensor& t = r.outputs[i];
    std::string name = g.output(i).name;
    fmt::print("  {}: {}  {}\n", name, typeString(t.dtype, t.shape), summarize(t));
    if (want) {
      CompareResult c = compare(t, want->outputs[i]);
      fmt::print("  check {}: {}\n", name, c.describe(t, want->outputs[i]));
      ok = ok && c.ok();
    }
  }
  if (engine.backend() != "reference")
    fmt::print(
        "  first run: {:.4g} ms ({} kernels compiled, {} loaded from the disk cache, {} from the "
        "remote cache; plan: {})\n",
        r.firstMs, r.compiled, r.fromDisk, r.fromRemote, r.plan);
  if (o.iters > 0) fmt::print("  {}\n", timingLine(r.timesMs));
  // On a GPU the run call returns once the kernels are queued: its own cost is the host overhead.
  if (o.iters > 0 && engine.device().device_type != kDLCPU)
    fmt::print("  host: median {:.2f} us per run call (until the kernels are queued)\n",
               median(r.callMs) * 1e3);
  return ok;
}

// The graphs `o` selects from module m (all, or --graph), checking --dim names against them.
std::vector<Graph> selectGraphs(const Module& m, const Options& o) {
  std::vector<Graph> graphs;
  if (!o.graph.empty()) {
    Graph g = m.find(o.graph);
    if (!g) {
      std::string names;
      for (size_t i = 0; i < m.size(); ++i) names += (i ? ", " : "") + m.graph(i).name();
      throw UsageError{
          fmt::format("{} has no graph named '{}' (it has: {})", o.file, o.graph, names)};
    }
    graphs.push_back(std::move(g));
  } else {
    for (size_t i = 0; i < m.size(); ++i) graphs.push_back(m.graph(i));
  }
  // Every --dim must name a symbol of some selected graph: a typo should not pass silently.
  for (const auto& [sym, n] : o.dims) {
    bool used = false;
    for (const Graph& g : graphs)
      for (size_t i = 0; i < g.numInputs(); ++i)
        for (const Dim& d : g.input(i).dims) used = used || d.symbol == sym;
    if (!used)
      throw UsageError{fmt::format("--dim {}: no selected graph has a symbolic dim {}", sym, sym)};
  }
  return graphs;
}

// Options that belong to another command are mistakes, not silently ignored.
void rejectOptions(const Options& o, const char* cmd, bool planFlags, bool runFlags) {
  std::string c = cmd;
  for (const auto& [key, value] : o.planOptions) {
    bool ok = planFlags && (key == "target" || key == "fusion" ||
                            (key == "format" && c == "plan") || (key == "emit" && c == "codegen"));
    if (!ok) throw UsageError{fmt::format("--{} is not an option of `stitch {}`", key, cmd)};
  }
  if (!runFlags && (o.check || o.iters))
    throw UsageError{fmt::format("--check and --iters are options of `stitch run`")};
  if (!runFlags && o.backend && c != "plan")
    throw UsageError{fmt::format("--backend is not an option of `stitch {}`", cmd)};
  if (o.planCandidate && c == "demo")
    throw UsageError{"--plan-candidate is not an option of `stitch demo`"};
}

int cmdRun(const std::vector<std::string>& args) {
  Options o = parseOptions(args, /*wantFile=*/true);
  rejectOptions(o, "run", false, true);
  Module m = Module::parseFile(o.file);
  std::vector<Graph> graphs = selectGraphs(m, o);
  Engine engine = makeEngine(o.backend, o.planCandidate);
  bool ok = true;
  for (const Graph& g : graphs) ok = runOne(engine, g, o) && ok;
  return ok ? kOk : kMismatch;
}

// plan and codegen: no device, output on stdout (notes on stderr, as it may be JSON or code).
int cmdExplain(const std::vector<std::string>& args, const char* cmd) {
  Options o = parseOptions(args, /*wantFile=*/true);
  rejectOptions(o, cmd, true, false);
  bool codegen = std::string(cmd) == "codegen";
  std::map<std::string, std::string> options = o.planOptions;
  if (o.planCandidate) options["plan_candidate"] = *o.planCandidate;
  if (o.backend) options["backend"] = *o.backend;
  Module m = Module::parseFile(o.file);
  for (const Graph& g : selectGraphs(m, o)) {
    std::map<std::string, int64_t> sizes;
    for (size_t i = 0; i < g.numInputs(); ++i)
      for (const Dim& d : g.input(i).dims) {
        if (d.symbol.empty() || sizes.count(d.symbol)) continue;
        auto it = o.dims.find(d.symbol);
        if (it != o.dims.end()) {
          sizes[d.symbol] = it->second;
        } else {
          sizes[d.symbol] = kDefaultDim;
          // On stderr: stdout may be JSON or DOT for a tool to read.
          fmt::print(stderr, "note: symbolic dim {} = {} (default; set it with --dim {}=N)\n",
                     d.symbol, kDefaultDim, d.symbol);
        }
      }
    std::fflush(stderr);
    fmt::print("{}", codegen ? g.codegen(options, sizes) : g.explainPlan(options, sizes));
    std::fflush(stdout);
  }
  return kOk;
}

int cmdDemo(const std::vector<std::string>& args) {
  Options o = parseOptions(args, /*wantFile=*/false);
  rejectOptions(o, "demo", false, true);
  if (o.iters == 0) o.iters = 3;
  Module m = Module::parse(kDemoGraphs, "<demo>");
  Engine engine = makeEngine(o.backend);
  // BERT-base at batch 2, sequence 128: 256 tokens.
  o.dims = {{"T", 256}, {"B", 2}, {"S", 128}};
  fmt::print("Stitch {} demo: the memory-bound parts of a BERT-base encoder layer\n",
             stitch_version());
  fmt::print("(batch 2, sequence 128, hidden 768, 12 heads), on the {} backend.\n\n",
             engine.backend());
  // Against the reference only when the backend is not the reference itself.
  o.check = engine.backend() != "reference";
  if (!o.check)
    fmt::print(
        "The reference interpreter is the only backend in this build: outputs are its own,\n"
        "so there is nothing to check them against.\n\n");
  bool ok = true;
  for (size_t i = 0; i < m.size(); ++i) {
    Graph g = m.graph(i);
    fmt::print("{}", g.print());
    ok = runOne(engine, g, o) && ok;
    fmt::print("\n");
  }
  fmt::print("{}\n", ok ? "demo: ok" : "demo: MISMATCH against the reference");
  return ok ? kOk : kMismatch;
}

// Bytes for people: "3.4 MiB (3565158 bytes)", or "512 B".
std::string humanBytes(uint64_t bytes) {
  constexpr std::array<const char*, 7> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < kUnits.size()) {
    v /= 1024;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.1f} {} ({} bytes)", v, kUnits[unit], bytes);
}

int cmdCache(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError{"cache needs a command: stats, clear or prune"};
  if (args.size() > 1) throw UsageError{fmt::format("unexpected argument '{}'", args[1])};
  const std::string& sub = args[0];
  if (sub == "stats") {
    const std::string dir = cacheDirPath();
    const stitch_cache_dir_stats_t s = cacheDirStats();
    fmt::print("directory: {}\n", dir);
    const stitch_cache_dir_kinds_t k = cacheDirKinds();
    fmt::print("entries: {}, {}\n", s.entries, humanBytes(s.bytes));
    fmt::print("  kernels: {}, program entries: {}, tuned plans: {}, machine profiles: {}\n",
               k.kernels, k.programs, k.tuned, k.profiles);
    fmt::print("temporary files: {}, {}\n", s.temporaries, humanBytes(s.temporary_bytes));
    fmt::print("limit (STITCH_CACHE_MAX_MB): {}, {:.1f}% used\n", humanBytes(s.limit_bytes),
               100.0 * static_cast<double>(s.bytes) / static_cast<double>(s.limit_bytes));
    return kOk;
  }
  if (sub == "clear") {
    const std::string dir = cacheDirPath();
    const CacheDirCleared c = cacheDirClear();
    fmt::print("cleared {}: removed {} files, {}\n", dir, c.files, humanBytes(c.bytes));
    return kOk;
  }
  if (sub == "prune") {
    const std::string dir = cacheDirPath();
    const stitch_cache_dir_prune_t p = cacheDirPrune();
    fmt::print(
        "pruned {}: removed {} stale temporary files, {} corrupt entries, {} least recently "
        "used entries; freed {}\n",
        dir, p.stale_temporaries, p.corrupt_entries, p.evicted_entries, humanBytes(p.freed_bytes));
    return kOk;
  }
  throw UsageError{fmt::format("unknown cache command '{}' (valid: stats, clear, prune)", sub)};
}

int cmdTune(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "fit")
    throw UsageError{args.empty() ? "tune needs a command: fit"
                                  : fmt::format("unknown tune command '{}' (valid: fit)", args[0])};
  std::map<std::string, std::string> options;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value", a)};
      return args[++i];
    };
    if (a == "--backend") options["backend"] = value();
    else if (a == "--hold-back") options["hold_back"] = value();
    else if (a == "--dry-run") options["dry_run"] = "1";
    else if (a == "--force") options["force"] = "1";
    else throw UsageError{fmt::format("unknown option '{}' of `stitch tune fit`", a)};
  }
  fmt::print("{}", tuneFit(options));
  return kOk;
}

int mainImpl(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kInvalid : kOk;
  }
  if (args[0] == "--version") {
    fmt::print("stitch {}\n", stitch_version());
    return kOk;
  }
  // Every STITCH_* variable before any work: a bad value exits 2 naming it, whether or not this
  // command would have read it (stitch_environment_check).
  checkEnvironment();
  std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "run") return cmdRun(args);
  if (cmd == "plan") return cmdExplain(args, "plan");
  if (cmd == "codegen") return cmdExplain(args, "codegen");
  if (cmd == "demo") return cmdDemo(args);
  if (cmd == "cache") return cmdCache(args);
  if (cmd == "tune") return cmdTune(args);
  throw UsageError{fmt::format("unknown command '{}'", cmd)};
}

}  // namespace
}  // namespace stitch::cli

int main(int argc, char** argv) {
  using namespace stitch::cli;
  try {
    return mainImpl(argc, argv);
  } catch (const UsageError& e) {
    fmt::print(stderr, "stitch: error: {}\n{}", e.message, kUsage);
    return kInvalid;
  } catch (const stitch::Error& e) {
    // Parse errors already read "FILE:LINE:COL: error: ..."; others get a prefix.
    std::string msg = e.what();
    bool located = msg.find(": error: ") != std::string::npos;
    fmt::print(stderr, "{}{}\n", located ? "" : "stitch: error: ", msg);
    return exitCodeFor(e.status());
  } catch (const std::exception& e) {
    fmt::print(stderr, "stitch: internal error: {}\n", e.what());
    return kInternal;
  }
}
