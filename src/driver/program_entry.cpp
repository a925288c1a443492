// Whole-program entries (design note in program_entry.h).
//
// Every struct is unpacked with a structured binding that names all of its members, in the
// encoder and in the decoder alike, so a member added to an artifact or target struct does not
// compile until both handle it (the rule of lower/serialize.h).
#include "driver/program_entry.h"

#include <set>
#include <type_traits>
#include <variant>

#include "ir/signature.h"
#include "runtime/support/canonical.h"
#include "runtime/support/checked.h"

namespace stitch::driver {

namespace {

// Writes a vector as its length, then each item with fn.
template <class T, class Fn>
void writeAll(CanonicalWriter& w, const std::vector<T>& items, Fn&& fn) {
  w.length(items.size());
  for (const T& item : items) fn(item);
}

// Reads a vector written by writeAll; every item takes at least minItemBytes bytes, which bounds
// the length by what is left before anything is allocated.
template <class T, class Fn>
std::vector<T> readAll(CanonicalReader& r, size_t minItemBytes, Fn&& fn) {
  std::vector<T> items(r.length(minItemBytes));
  for (T& item : items) fn(item);
  return items;
}

void writeDims(CanonicalWriter& w, const ir::Shape& shape) {
  writeAll(w, shape, [&](const ir::Dim& d) {
    const auto& [size, symbol] = d;
    w.integer(size);
    w.string(symbol);
  });
}

void writeAttr(CanonicalWriter& w, const ir::Attr& a) {
  const auto& [name, value] = a;
  w.string(name);
  w.enumeration(ir::kindOf(value));
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, int64_t>) w.integer(v);
        else if constexpr (std::is_same_v<V, double>) w.real(v);
        else if constexpr (std::is_same_v<V, bool>) w.boolean(v);
        else if constexpr (std::is_same_v<V, std::vector<int64_t>>)
          writeAll(w, v, [&](int64_t x) { w.integer(x); });
        else if constexpr (std::is_same_v<V, ir::Shape>) writeDims(w, v);
        else if constexpr (std::is_same_v<V, ir::DType>) w.enumeration(v);
        else {
          static_assert(std::is_same_v<V, std::string>, "an attribute kind is not serialized");
          w.string(v);
        }
      },
      value);
}

// The artifact's structs, both ways.

void write(CanonicalWriter& w, const rt::EntryPoint& e) {
  const auto& [symbol, units, grain, grid, block, sharedBytes] = e;
  w.string(symbol);
  w.integer(units);
  w.integer(grain);
  w.integer(grid);
  w.integer(block);
  w.integer(sharedBytes);
}

void read(CanonicalReader& r, rt::EntryPoint& e) {
  auto& [symbol, units, grain, grid, block, sharedBytes] = e;
  symbol = r.string();
  units = r.integer<int64_t>();
  grain = r.integer<int64_t>();
  grid = r.integer<int64_t>();
  block = r.integer<int>();
  sharedBytes = r.integer<int>();
}

void write(CanonicalWriter& w, const rt::KernelCode& c) {
  const auto& [key, language, text, headers, requiresAlignment, phases, cooperative] = c;
  writeAll(w, key.parts, [&](const rt::CacheKey::Part& p) {
    w.string(p.name);
    w.string(p.bytes);
  });
  w.string(key.version);
  w.string(language);
  w.string(text);
  // The device headers are this build's (the key's version says which build): only whether the
  // code has them is stored.
  w.boolean(headers != nullptr);
  w.boolean(requiresAlignment);
  writeAll(w, phases, [&](const rt::EntryPoint& e) { write(w, e); });
  write(w, cooperative);
}

void read(CanonicalReader& r, rt::KernelCode& c, const target::Target& target) {
  auto& [key, language, text, headers, requiresAlignment, phases, cooperative] = c;
  key.parts = readAll<rt::CacheKey::Part>(r, 16, [&](rt::CacheKey::Part& p) {
    p.name = r.string();
    p.bytes = r.string();
  });
  key.version = r.string();
  language = r.string();
  text = r.string();
  // The target's headers (a GPU's device templates): build constants, not stored.
  if (r.boolean()) {
    headers = target.headers();
    if (!headers)
      throwError(ErrorCode::InvalidArgument,
                 "program entry: code that includes headers, for a target that has none");
  }
  requiresAlignment = r.boolean();
  phases = readAll<rt::EntryPoint>(r, 8, [&](rt::EntryPoint& e) { read(r, e); });
  read(r, cooperative);
}

void write(CanonicalWriter& w, const rt::KernelArtifact& k) {
  const auto& [name, params, phases, sizes, checks, forms] = k;
  w.string(name);
  writeAll(w, params, [&](const rt::KernelBuffer& b) {
    const auto& [value, scratch, dtype, elements] = b;
    w.integer(value);
    w.integer(scratch);
    w.enumeration(dtype);
    w.integer(elements);
  });
  writeAll(w, phases, [&](const rt::PhaseBuffers& p) {
    const auto& [phaseParams, numInputs] = p;
    writeAll(w, phaseParams, [&](int i) { w.integer(i); });
    w.integer(numInputs);
  });
  writeAll(w, sizes, [&](int64_t s) { w.integer(s); });
  writeAll(w, checks, [&](const std::string& c) { w.string(c); });
  writeAll(w, forms, [&](const rt::KernelCode& c) { write(w, c); });
}

void read(CanonicalReader& r, rt::KernelArtifact& k, const target::Target& target) {
  auto& [name, params, phases, sizes, checks, forms] = k;
  name = r.string();
  params = readAll<rt::KernelBuffer>(r, 17, [&](rt::KernelBuffer& b) {
    auto& [value, scratch, dtype, elements] = b;
    value = r.integer<int>();
    scratch = r.integer<int>();
    dtype = r.enumeration<ir::DType>();
    if (static_cast<int>(dtype) >= ir::kNumDTypes)
      throwError(ErrorCode::InvalidArgument, "program entry: unknown dtype");
    elements = r.integer<int64_t>();
  });
  phases = readAll<rt::PhaseBuffers>(r, 12, [&](rt::PhaseBuffers& p) {
    auto& [phaseParams, numInputs] = p;
    phaseParams = readAll<int>(r, 4, [&](int& i) { i = r.integer<int>(); });
    numInputs = r.integer<int>();
  });
  sizes = readAll<int64_t>(r, 8, [&](int64_t& s) { s = r.integer<int64_t>(); });
  checks = readAll<std::string>(r, 8, [&](std::string& c) { c = r.string(); });
  forms = readAll<rt::KernelCode>(r, 8, [&](rt::KernelCode& c) { read(r, c, target); });
}

}  // namespace

std::string serializeGraph(const ir::Graph& g) {
  CanonicalWriter w;
  w.string("stitch-graph/1");
  w.string(g.name());
  w.length(g.nodes().size());
  for (const ir::Node& n : g.nodes()) {
    const auto& [op, operands, attrs, type, name, loc] = n;
    (void)loc;  // where the text came from: nothing downstream reads it
    w.enumeration(op);
    writeAll(w, operands, [&](int id) { w.integer(id); });
    w.length(attrs.list().size());
    for (const ir::Attr& a : attrs.list()) writeAttr(w, a);
    const auto& [dtype, shape] = type;
    w.enumeration(dtype);
    writeDims(w, shape);
    w.string(name);
  }
  w.length(g.inputs().size());
  for (int id : g.inputs()) w.integer(id);
  w.length(g.outputs().size());
  for (int id : g.outputs()) w.integer(id);
  return w.take();
}

std::string serializeTarget(const rt::Target& t) {
  const auto& [backend, arch, warpSize, processors, host, hostOptions, hostProfile, compiler,
               device, calibration] = t;
  CanonicalWriter w;
  w.string(backend);
  w.string(arch);
  w.integer(warpSize);
  w.integer(processors);
  const auto& [triple, cpu, features, llvmVersion] = host;
  for (const std::string* s : {&triple, &cpu, &features, &llvmVersion}) w.string(*s);
  const auto& [optLevel, mathLibrary, streamingStoreBytes] = hostOptions;
  w.integer(optLevel);
  w.string(mathLibrary);
  w.integer(streamingStoreBytes);
  const auto& [model, threads, simdWidth, l1Bytes, l2Bytes, l3Bytes, hostBandwidth] = hostProfile;
  w.string(model);
  w.integer(threads);
  w.integer(simdWidth);
  w.integer(l1Bytes);
  w.integer(l2Bytes);
  w.integer(l3Bytes);
  w.real(hostBandwidth);
  const auto& [compilerName, compilerVersion, compilerOptions] = compiler;
  w.string(compilerName);
  w.string(compilerVersion);
  writeAll(w, compilerOptions, [&](const std::string& o) { w.string(o); });
  const auto& [name, driverVersion, maxThreadsPerProcessor, maxBlocksPerProcessor,
               maxThreadsPerBlock, registersPerProcessor, sharedMemoryPerProcessor,
               sharedMemoryPerBlock, clockHz, deviceBandwidth] = device;
  w.string(name);
  w.string(driverVersion);
  w.integer(maxThreadsPerProcessor);
  w.integer(maxBlocksPerProcessor);
  w.integer(maxThreadsPerBlock);
  w.integer(registersPerProcessor);
  w.integer(sharedMemoryPerProcessor);
  w.integer(sharedMemoryPerBlock);
  w.real(clockHz);
  w.real(deviceBandwidth);
  const auto& [fittedBandwidth, cacheBandwidth, memoryLatency, launchOverhead, flops,
               expensiveFlops, gridSyncTime, samples] = calibration;
  for (double v : {fittedBandwidth, cacheBandwidth, memoryLatency, launchOverhead, flops,
                   expensiveFlops, gridSyncTime})
    w.real(v);
  w.integer(samples);
  return w.take();
}

rt::CacheKey programEntryKey(const ir::Graph& optimized,
                             std::span<const ir::ConcreteInput> signature, const rt::Target& target,
                             const Options& options) {
  return signatureEntryKey("program", kProgramEntryFormat, optimized, signature, target, options);
}

rt::CacheKey signatureEntryKey(std::string_view entry, uint32_t format, const ir::Graph& optimized,
                               std::span<const ir::ConcreteInput> signature,
                               const rt::Target& target, const Options& options) {
  CanonicalWriter sig;
  sig.length(signature.size());
  for (const ir::ConcreteInput& in : signature) {
    sig.enumeration(in.dtype);
    sig.length(in.shape.size());
    for (int64_t d : in.shape) sig.integer(d);
  }
  const auto& [mode, planCandidate] = options;
  rt::CacheKey key;
  key.add("entry", std::string(entry))
      .add("entry-format", canonicalBytes(format))
      .add("graph", serializeGraph(optimized))
      .add("signature", sig.take())
      .add("target", serializeTarget(target))
      .add("fusion", canonicalBytes(mode))
      .add("plan-candidate", canonicalBytes(planCandidate))
      .add("shape-classes", canonicalBytes(shapeClassesEnabled()));
  return key;
}

std::vector<uint8_t> encodeProgramArtifact(const rt::ProgramArtifact& a) {
  const auto& [name, kernels, external, valueLabels] = a;
  CanonicalWriter w;
  w.integer(kProgramEntryFormat);
  w.string(name);
  writeAll(w, kernels, [&](const rt::KernelArtifact& k) { write(w, k); });
  writeAll(w, external, [&](int v) { w.integer(v); });
  writeAll(w, valueLabels, [&](const std::string& s) { w.string(s); });
  const std::string& bytes = w.bytes();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

rt::ProgramArtifact decodeProgramArtifact(std::span<const uint8_t> bytes,
                                          const target::Target& target) {
  CanonicalReader r(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  if (r.integer<uint32_t>() != kProgramEntryFormat)
    throwError(ErrorCode::InvalidArgument, "program entry: another entry format");
  rt::ProgramArtifact a;
  auto& [name, kernels, external, valueLabels] = a;
  name = r.string();
  kernels = readAll<rt::KernelArtifact>(r, 40, [&](rt::KernelArtifact& k) { read(r, k, target); });
  external = readAll<int>(r, 4, [&](int& v) { v = r.integer<int>(); });
  valueLabels = readAll<std::string>(r, 8, [&](std::string& s) { s = r.string(); });
  r.finish();
  return a;
}

namespace {

[[noreturn]] void defect(const std::string& what) {
  throwError(ErrorCode::InvalidArgument, "program entry: " + what);
}

void checkLaunch(const rt::EntryPoint& e, const std::string& where) {
  const auto& [symbol, units, grain, grid, block, sharedBytes] = e;
  if (symbol.empty()) defect(where + " has no symbol");
  if (units < 0 || grain < 1 || grid < 1 || block < 1 || sharedBytes < 0)
    defect(
        fmt::format("{} ({}) has launch figures out of range: units {}, grain {}, grid {}, "
                    "block {}, shared memory {} bytes",
                    where, symbol, units, grain, grid, block, sharedBytes));
}

void checkForm(const rt::KernelCode& code, size_t numPhases, const target::Target& target,
               const std::string& where) {
  const auto& [key, lang, text, headers, requiresAlignment, phases, cooperative] = code;
  (void)text, (void)requiresAlignment;  // code and flags: what the key describes
  if (lang != target.language()) defect(where + " is code of another backend's language");
  if ((headers != nullptr) != (target.headers() != nullptr))
    defect(where + (headers ? " includes headers its target has none of"
                            : " lacks the headers its target's code includes"));
  if (key.version != rt::CacheKey().version)
    defect(fmt::format("{}'s key is of another build ({})", where, key.version));
  if (phases.size() != numPhases)
    defect(fmt::format("{} has {} entry points for {} phases", where, phases.size(), numPhases));
  std::set<std::string_view> symbols;
  for (size_t i = 0; i < phases.size(); ++i) {
    const std::string at = fmt::format("{}, phase {}", where, i);
    checkLaunch(phases[i], at);
    if (!symbols.insert(phases[i].symbol).second)
      defect(fmt::format("{} defines {} twice", where, phases[i].symbol));
  }
  if (std::string wrong = target.checkCode(code); !wrong.empty()) defect(where + ": " + wrong);
  if (!cooperative.symbol.empty()) {
    checkLaunch(cooperative, where + ", cooperative entry");
    if (!symbols.insert(cooperative.symbol).second)
      defect(fmt::format("{} defines {} twice", where, cooperative.symbol));
  }
}

}  // namespace

void validateProgramArtifact(const rt::ProgramArtifact& a, const ir::Graph& optimized,
                             std::span<const ir::ConcreteInput> signature,
                             const target::Target& target) {
  const auto& [name, kernels, external, valueLabels] = a;
  if (name != optimized.name())
    defect(fmt::format("an artifact of graph '{}', not '{}'", name, optimized.name()));
  std::vector<int> wantExternal(optimized.inputs().begin(), optimized.inputs().end());
  wantExternal.insert(wantExternal.end(), optimized.outputs().begin(), optimized.outputs().end());
  if (external != wantExternal)
    defect("its values in the caller's memory are not the graph's inputs and outputs");
  const size_t numNodes = optimized.nodes().size();
  if (valueLabels.size() != numNodes)
    defect(fmt::format("{} value labels for {} nodes", valueLabels.size(), numNodes));
  const std::vector<std::vector<int64_t>> shapes =
      ir::concreteShapes(optimized, ir::bindInputs(optimized, signature));

  // Scratch slots are numbered densely across the program: fewer than its parameters.
  size_t numParams = 0;
  for (const rt::KernelArtifact& k : kernels) numParams += k.params.size();
  std::vector<char> isInput(numNodes, 0), written(numNodes, 0), scratchWritten(numParams, 0);
  for (int id : optimized.inputs()) isInput[static_cast<size_t>(id)] = 1;

  // What an index check may name: the graph's gathers and check_index ops (the lowering labels
  // each check after its node, ir::indexCheckLabel).
  std::set<std::string> checkLabels;
  for (const ir::Node& n : optimized.nodes())
    if (n.op == ir::OpCode::Gather || n.op == ir::OpCode::CheckIndex)
      checkLabels.insert(ir::indexCheckLabel(n));

  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    const auto& [kernelName, params, phases, sizes, checks, forms] = kernels[ki];
    (void)sizes;  // any values: the code reads them as the sizes it was built for
    const std::string where = fmt::format("kernel {} ({})", ki, kernelName);
    for (const std::string& c : checks)
      if (!checkLabels.count(c))
        defect(
            fmt::format("{} checks indices for \"{}\", which is no gather or check_index of "
                        "the graph",
                        where, c));
    if (phases.empty()) defect(where + " has no phases");
    if (forms.empty()) defect(where + " has no code");
    for (size_t f = 0; f < forms.size(); ++f)
      checkForm(forms[f], phases.size(), target, fmt::format("{}, form {}", where, f));
    for (size_t pi = 0; pi < params.size(); ++pi) {
      const auto& [value, scratch, dtype, elements] = params[pi];
      const std::string at = fmt::format("{}, parameter {}", where, pi);
      if ((value >= 0) == (scratch >= 0))
        defect(fmt::format("{} names {} a value and a scratch slot", at,
                           value >= 0 ? "both" : "neither"));
      if (value >= 0) {
        if (static_cast<size_t>(value) >= numNodes)
          defect(fmt::format("{} names value {}, past the graph's {} nodes", at, value, numNodes));
        const ir::Node& n = optimized.node(value);
        int64_t count = 1;
        for (int64_t d : shapes[static_cast<size_t>(value)]) count *= d;  // fits: bindInputs
        if (dtype != n.type.dtype || elements != count)
          defect(fmt::format("{} is value {} as {} x {}, but the value is {} x {}", at, value,
                             elements, ir::dtypeName(dtype), count, ir::dtypeName(n.type.dtype)));
      } else {
        if (static_cast<size_t>(scratch) >= numParams)
          defect(fmt::format("{} names scratch slot {}, past the program's {} parameters", at,
                             scratch, numParams));
        if (!checkedByteSize(elements, ir::dtypeBytes(dtype)))
          defect(fmt::format("{} is a scratch slot of {} elements", at, elements));
      }
    }
    // The steps in run order, as every backend's slot planner takes them (runtime/slots.h): a
    // phase's writes first (it may read back what it writes: column partials), then its reads.
    for (size_t ph = 0; ph < phases.size(); ++ph) {
      const auto& [phaseParams, numInputs] = phases[ph];
      const std::string at = fmt::format("{}, phase {}", where, ph);
      if (numInputs < 0 || static_cast<size_t>(numInputs) > phaseParams.size())
        defect(fmt::format("{} has {} inputs of {} parameters", at, numInputs, phaseParams.size()));
      for (int i : phaseParams)
        if (i < 0 || static_cast<size_t>(i) >= params.size())
          defect(fmt::format("{} uses parameter {} of {}", at, i, params.size()));
      for (size_t j = static_cast<size_t>(numInputs); j < phaseParams.size(); ++j) {
        const rt::KernelBuffer& b = params[static_cast<size_t>(phaseParams[j])];
        if (b.value < 0) {
          scratchWritten[static_cast<size_t>(b.scratch)] = 1;
        } else if (isInput[static_cast<size_t>(b.value)]) {
          defect(fmt::format("{} writes graph input {}", at, b.value));
        } else {
          written[static_cast<size_t>(b.value)] = 1;
        }
      }
      for (size_t j = 0; j < static_cast<size_t>(numInputs); ++j) {
        const rt::KernelBuffer& b = params[static_cast<size_t>(phaseParams[j])];
        const bool ready = b.value < 0 ? scratchWritten[static_cast<size_t>(b.scratch)] != 0
                                       : isInput[static_cast<size_t>(b.value)] ||
                                             written[static_cast<size_t>(b.value)];
        if (!ready)
          defect(fmt::format("{} reads {} {} before any step writes it", at,
                             b.value < 0 ? "scratch slot" : "value",
                             b.value < 0 ? b.scratch : b.value));
      }
    }
  }
  for (int id : optimized.outputs())
    if (!isInput[static_cast<size_t>(id)] && !written[static_cast<size_t>(id)])
      defect(fmt::format("no kernel writes output value {}", id));
}

}  // namespace stitch::driver
