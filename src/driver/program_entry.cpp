// Whole-program entries (design note in program_entry.h).
//
// Every struct is unpacked with a structured binding that names all of its members, in the
// encoder and in the decoder alike, so a member added to an artifact or target struct does not
// compile until both handle it (the rule of lower/serialize.h).
#include "driver/program_entry.h"

#include <type_traits>
#include <variant>

#include "support/canonical.h"

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
  w.enumeration(language);
  w.string(text);
  // The device headers are this build's (the key's version says which build): only whether the
  // code has them is stored.
  w.boolean(headers != nullptr);
  w.boolean(requiresAlignment);
  writeAll(w, phases, [&](const rt::EntryPoint& e) { write(w, e); });
  write(w, cooperative);
}

void read(CanonicalReader& r, rt::KernelCode& c) {
  auto& [key, language, text, headers, requiresAlignment, phases, cooperative] = c;
  key.parts = readAll<rt::CacheKey::Part>(r, 16, [&](rt::CacheKey::Part& p) {
    p.name = r.string();
    p.bytes = r.string();
  });
  key.version = r.string();
  language = r.enumeration<rt::CodeLanguage>();
  if (language != rt::CodeLanguage::LlvmIr && language != rt::CodeLanguage::Cuda &&
      language != rt::CodeLanguage::Hip)
    throwError(ErrorCode::InvalidArgument, "program entry: unknown code language");
  text = r.string();
  headers = r.boolean() ? deviceHeaders() : nullptr;
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

void read(CanonicalReader& r, rt::KernelArtifact& k) {
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
  forms = readAll<rt::KernelCode>(r, 8, [&](rt::KernelCode& c) { read(r, c); });
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
  const auto& [kind, arch, warpSize, processors, host, hostOptions, hostProfile, compiler, device] =
      t;
  CanonicalWriter w;
  w.enumeration(kind);
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
  return w.take();
}

rt::CacheKey programEntryKey(const ir::Graph& optimized,
                             std::span<const ir::ConcreteInput> signature, const rt::Target& target,
                             const Options& options) {
  CanonicalWriter sig;
  sig.length(signature.size());
  for (const ir::ConcreteInput& in : signature) {
    sig.enumeration(in.dtype);
    sig.length(in.shape.size());
    for (int64_t d : in.shape) sig.integer(d);
  }
  const auto& [mode, planCandidate] = options;
  rt::CacheKey key;
  key.add("entry", "program")
      .add("entry-format", canonicalBytes(kProgramEntryFormat))
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

rt::ProgramArtifact decodeProgramArtifact(std::span<const uint8_t> bytes) {
  CanonicalReader r(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  if (r.integer<uint32_t>() != kProgramEntryFormat)
    throwError(ErrorCode::InvalidArgument, "program entry: another entry format");
  rt::ProgramArtifact a;
  auto& [name, kernels, external, valueLabels] = a;
  name = r.string();
  kernels = readAll<rt::KernelArtifact>(r, 40, [&](rt::KernelArtifact& k) { read(r, k); });
  external = readAll<int>(r, 4, [&](int& v) { v = r.integer<int>(); });
  valueLabels = readAll<std::string>(r, 8, [&](std::string& s) { s = r.string(); });
  r.finish();
  return a;
}

}  // namespace stitch::driver
