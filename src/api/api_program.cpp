// Engines and programs in the C API: options, backend resolution, DLPack checks, running.
//
// DLTensor checks live here, once, for every backend: dtype (lanes 1), device, compact strides
// (dims of size 1 may have any stride, as PyTorch produces them), non-NULL data. The backend then
// sees plain compact buffers.
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string_view>

#include "api/api_internal.h"
#include "fusion/explain.h"
#include "fusion/hardware.h"
#include "fusion/planner.h"
#include "ir/signature.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "runtime/gpu/gpu_executor.h"
#include "support/checked.h"
#include "support/env.h"
#include "support/logging.h"
#include "support/memory.h"
#if defined(STITCH_HAVE_LLVM)
#include "codegen/llvm/llvm_emitter.h"
#include "runtime/cpu/arena.h"
#include "runtime/cpu/cached_compiler.h"
#include "runtime/cpu/executor.h"
#include "runtime/cpu/thread_pool.h"
#endif

using namespace stitch;

namespace {

// What a program makes for one input signature on its first run: the plan, and on the cpu
// backend its compiled kernels (every phase of every kernel, in order), where intermediates live
// in the arena, and the arenas themselves (one per concurrent run). On the GPU backends: the
// lowered kernel programs, their loaded kernels in two variants (16-byte aligned buffers, which
// allow vector accesses, and any alignment; the second is compiled only if a run needs it), the
// slot plan and the device arenas (one per stream).
struct SignatureState {
  std::shared_ptr<const fusion::Plan> plan;
  std::vector<lower::KernelProgram> programs;
  std::mutex gpuMutex;  // guards gpuKernels[0] (made lazily)
  std::vector<std::shared_ptr<const rt::gpu::GpuKernel>> gpuKernels[2];  // [aligned]
  rt::cpu::SlotPlan gpuSlots;
  std::unique_ptr<rt::gpu::GpuArenas> gpuArenas;
  int cooperativeKernels = 0;
#if defined(STITCH_HAVE_LLVM)
  std::vector<std::shared_ptr<const rt::cpu::KernelPhases>> compiled;  // keeps the code alive
  std::vector<rt::cpu::CompiledKernel> kernels;
  rt::cpu::SlotPlan slots;
  rt::cpu::ArenaPool arenas;
#endif
};

}  // namespace

// A program: the graph as given (the reference backend runs it, unfused: it is the oracle), the
// graph after the passes (what planning and code generation see), and what was made for each
// input signature so far.
struct stitch_program_s {
  std::shared_ptr<const api::EngineConfig> config;
  ir::Graph graph;
  ir::Graph optimized;
  std::mutex mutex;  // guards states
  std::map<std::string, std::shared_ptr<SignatureState>> states;
};

namespace {

constexpr int kDLBoolCode = 6;  // kDLBool, added to DLPack after the 0.6 headers Debian ships

constexpr std::array<std::string_view, 2> kOptionKeys = {"backend", "fusion"};
constexpr std::array<std::string_view, 3> kDumpChoices = {"plan", "source", "llvm"};

std::string dlTypeStr(DLDataType t) {
  return fmt::format("{{code {}, bits {}, lanes {}}}", t.code, t.bits, t.lanes);
}

ir::DType fromDL(DLDataType t, std::string_view what) {
  if (t.lanes == 1) {
    switch (t.code) {
      case kDLFloat:
        if (t.bits == 16) return ir::DType::F16;
        if (t.bits == 32) return ir::DType::F32;
        if (t.bits == 64) return ir::DType::F64;
        break;
      case kDLBfloat:
        if (t.bits == 16) return ir::DType::BF16;
        break;
      case kDLInt:
        if (t.bits == 32) return ir::DType::I32;
        if (t.bits == 64) return ir::DType::I64;
        break;
      case kDLUInt:
      case kDLBoolCode:
        if (t.bits == 8) return ir::DType::Bool;
        break;
      default: break;
    }
  }
  throwError(ErrorCode::ShapeMismatch,
             fmt::format("{} has DLPack dtype {}, which Stitch does not support (f16, bf16, f32, "
                         "f64, i32, i64, bool)",
                         what, dlTypeStr(t)));
}

bool hostAccessible(DLDeviceType d) {
  return d == kDLCPU || d == kDLCUDAHost || d == kDLROCMHost || d == kDLCUDAManaged;
}

bool isGpu(rt::Backend b) { return b == rt::Backend::Cuda || b == rt::Backend::Hip; }

// The GPU runtime of a backend resolved by an engine (which checked it is available).
rt::gpu::GpuRuntime& gpuRuntime(rt::Backend b) {
  std::string why;
  rt::gpu::GpuRuntime* r = rt::gpu::GpuRuntime::get(b, &why);
  STITCH_CHECK(r != nullptr, ErrorCode::BackendUnavailable, "backend '{}' is unavailable: {}",
               rt::backendName(b), why);
  return *r;
}

// Checks one tensor and returns its dtype; `what` names it in messages ("input 0 ('x')").
ir::DType checkTensor(const DLTensor& t, const std::string& what, rt::Backend backend) {
  ir::DType dtype = fromDL(t.dtype, what);
  STITCH_CHECK(t.ndim >= 0 && (t.ndim == 0 || t.shape != nullptr), ErrorCode::InvalidArgument,
               "{} has ndim {} and shape {}", what, t.ndim, t.shape ? "set" : "NULL");
  // The reference and cpu backends run on the host; cuda and hip on device 0 of their kind.
  bool onHost = backend == rt::Backend::Reference || backend == rt::Backend::Cpu;
  STITCH_CHECK(!onHost || hostAccessible(t.device.device_type), ErrorCode::InvalidArgument,
               "{} is on DLPack device type {}, but the {} backend needs host memory (kDLCPU)",
               what, static_cast<int>(t.device.device_type), rt::backendName(backend));
  if (!onHost) {
    bool cuda = backend == rt::Backend::Cuda;
    DLDeviceType want = cuda ? kDLCUDA : kDLROCM;
    STITCH_CHECK(t.device.device_type == want || (cuda && t.device.device_type == kDLCUDAManaged),
                 ErrorCode::InvalidArgument,
                 "{} is on DLPack device type {}, but the {} backend needs device memory ({})",
                 what, static_cast<int>(t.device.device_type), rt::backendName(backend),
                 cuda ? "kDLCUDA" : "kDLROCM");
    STITCH_CHECK(t.device.device_id == 0, ErrorCode::Unsupported,
                 "{} is on device {}; this version of Stitch runs on device 0 only", what,
                 t.device.device_id);
  }
  // The size must fit (support/checked.h) before anything multiplies the dims or indexes the
  // buffer: [2^58, 64] would wrap to 0 elements and pass as empty.
  TensorSize size = requireTensorSize(std::span<const int64_t>(t.shape, t.ndim),
                                      ir::dtypeBytes(dtype), what, ErrorCode::InvalidArgument);
  if (t.strides) {
    int64_t expect = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expect) {
        std::string strides, shape;
        for (int k = 0; k < t.ndim; ++k) {
          strides += (k ? ", " : "") + std::to_string(t.strides[k]);
          shape += (k ? ", " : "") + std::to_string(t.shape[k]);
        }
        throwError(
            ErrorCode::Unsupported,
            fmt::format("{} has strides [{}] for shape [{}], which is not compact row-major; "
                        "pass a contiguous tensor",
                        what, strides, shape));
      }
      expect *= t.shape[i];  // within the size checked above
    }
  }
  STITCH_CHECK(t.data != nullptr || size.elements == 0, ErrorCode::InvalidArgument,
               "{} has NULL data", what);
  return dtype;
}

std::string inputName(const ir::Graph& g, size_t i) {
  return fmt::format("input {} ('{}')", i, g.node(g.inputs()[i]).name);
}

std::string outputName(const ir::Graph& g, size_t i) {
  return fmt::format("output {} ('{}')", i, g.node(g.outputs()[i]).name);
}

// Validates the inputs and returns their concrete signature.
std::vector<ir::ConcreteInput> signatureOf(const stitch_program_s& p, const DLTensor* inputs,
                                           size_t n) {
  const ir::Graph& g = p.graph;
  STITCH_CHECK(n == g.inputs().size(), ErrorCode::ShapeMismatch,
               "graph {} takes {} inputs, but {} were given", g.name(), g.inputs().size(), n);
  std::vector<ir::ConcreteInput> sig;
  for (size_t i = 0; i < n; ++i) {
    ir::DType t = fromDL(inputs[i].dtype, inputName(g, i));
    STITCH_CHECK(inputs[i].ndim >= 0 && (inputs[i].ndim == 0 || inputs[i].shape != nullptr),
                 ErrorCode::InvalidArgument, "{} has no shape", inputName(g, i));
    sig.push_back({t, std::span<const int64_t>(inputs[i].shape, inputs[i].ndim)});
  }
  return sig;
}

// The hardware profile a backend's plans are priced for: the device's family on the GPUs.
fusion::HardwareProfile profileFor(rt::Backend b) {
  if (isGpu(b))
    return *fusion::findProfile(std::string(codegen::costProfileName(gpuRuntime(b).target())));
  static const fusion::HardwareProfile host = *fusion::findProfile("host");
  return host;
}

// "f32[4, 768];f32[768]": the key of a program's per-signature state.
std::string signatureKey(std::span<const reference::TensorView> inputs) {
  std::string key;
  for (const auto& t : inputs) {
    key += std::string(ir::dtypeName(t.dtype)) + "[";
    for (size_t i = 0; i < t.shape.size(); ++i) key += (i ? "," : "") + std::to_string(t.shape[i]);
    key += "];";
  }
  return key;
}

#if defined(STITCH_HAVE_LLVM)
// The cpu backend's intermediates must fit the machine (support/memory.h); refused here, before
// the first run, with the largest of them named.
void checkArenaFits(const ir::Graph& g, const SignatureState& s) {
  int64_t total = s.slots.totalBytes();
  if (total <= hostMemoryBytes()) return;
  int largest = -1;
  int64_t largestBytes = 0;
  for (const rt::cpu::CompiledKernel& k : s.kernels)
    for (const rt::cpu::KernelBuffer& b : k.outputs) {
      int64_t bytes = saturatingMul(b.elements, ir::dtypeBytes(b.dtype));
      bool inArena = b.value >= 0 && static_cast<size_t>(b.value) < s.slots.valueSlot.size() &&
                     s.slots.valueSlot[static_cast<size_t>(b.value)] >= 0;
      if (inArena && bytes > largestBytes) largest = b.value, largestBytes = bytes;
    }
  std::string what = fmt::format("graph {} on the cpu backend: its intermediates", g.name());
  if (largest >= 0)
    what += fmt::format(" (the largest, '{}' {}, takes {})", g.node(largest).name,
                        ir::typeStr(g.node(largest).type), bytesText(largestBytes));
  checkHostMemory(total, what);
}
#endif

// The state for this input signature, made on its first run: the plan (dumped if asked) and, on
// the cpu backend, the compiled kernels. Later runs of the signature find it in the map.
std::shared_ptr<SignatureState> stateFor(stitch_program_s& p,
                                         std::span<const reference::TensorView> inputs) {
  std::string key = signatureKey(inputs);
  std::lock_guard<std::mutex> lock(p.mutex);
  if (auto it = p.states.find(key); it != p.states.end()) return it->second;
  std::vector<ir::ConcreteInput> sig;
  for (const auto& t : inputs) sig.push_back({t.dtype, t.shape});
  ir::Bindings bindings = ir::bindInputs(p.optimized, sig);
  fusion::PlannerOptions options;
  options.mode = p.config->fusion;
  auto plan = std::make_shared<const fusion::Plan>(
      fusion::planGraph(p.optimized, bindings, profileFor(p.config->backend), options));
  log().debug("graph {}: signature {} planned into {} kernels ({} ops)", p.graph.name(), key,
              plan->kernels.size(), p.optimized.numOps());
  // STITCH_DUMP files are named GRAPH.SIGNATURE-HASH.WHAT, one set per signature.
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the signature
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  auto dump = [&](const char* what, const std::string& suffix, const std::string& text) {
    std::string path =
        fmt::format("{}/{}.{:016x}.{}", p.config->dumpDir, p.graph.name(), h, suffix);
    std::ofstream f(path);
    f << text;
    if (!f) log().warn("STITCH_DUMP={}: cannot write {}", what, path);
    else log().info("STITCH_DUMP={}: wrote {}", what, path);
  };
  if (p.config->dumpPlan)
    dump("plan", "plan.txt", "# signature " + key + "\n" + fusion::explainText(p.optimized, *plan));
  // The generated code of each kernel: CUDA/HIP C++ on the GPU backends, LLVM IR (before
  // optimization) on the cpu backend.
  if (p.config->dumpSource || p.config->dumpLlvm) {
    for (size_t i = 0; i < plan->kernels.size(); ++i) {
      lower::KernelProgram prog = lower::lowerKernel(p.optimized, plan->kernels[i], bindings);
      if (p.config->dumpSource && isGpu(p.config->backend)) {
        bool hip = p.config->backend == rt::Backend::Hip;
        dump("source", fmt::format("kernel{}.{}", i, hip ? "hip" : "cu"),
             codegen::emitGpuKernel(prog, gpuRuntime(p.config->backend).target()).source);
      }
#if defined(STITCH_HAVE_LLVM)
      if (p.config->dumpLlvm && p.config->backend == rt::Backend::Cpu)
        dump("llvm", fmt::format("kernel{}.ll", i),
             codegen::programIR(prog, fmt::format("stitch_k{}", i)));
#endif
    }
  }
  auto state = std::make_shared<SignatureState>();
  state->plan = plan;
  if (isGpu(p.config->backend)) {
    rt::gpu::GpuRuntime& gpu = gpuRuntime(p.config->backend);
    for (const fusion::Kernel& k : plan->kernels) {
      state->programs.push_back(lower::lowerKernel(p.optimized, k, bindings));
      state->gpuKernels[1].push_back(gpu.kernel(state->programs.back(), /*aligned=*/true));
      if (state->gpuKernels[1].back()->cooperativeFn()) ++state->cooperativeKernels;
    }
    std::vector<int> external(p.optimized.inputs().begin(), p.optimized.inputs().end());
    external.insert(external.end(), p.optimized.outputs().begin(), p.optimized.outputs().end());
    state->gpuSlots = rt::gpu::planGpuSlots(state->gpuKernels[1], external);
    state->gpuArenas = std::make_unique<rt::gpu::GpuArenas>(gpu.device());
  }
#if defined(STITCH_HAVE_LLVM)
  if (p.config->backend == rt::Backend::Cpu) {
    rt::cpu::HostCompiler& compiler = rt::cpu::HostCompiler::instance();
    for (const fusion::Kernel& k : plan->kernels) {
      state->compiled.push_back(compiler.compile(p.optimized, k, bindings));
      for (const rt::cpu::CompiledKernel& ck : *state->compiled.back())
        state->kernels.push_back(ck);
    }
    std::vector<int> external(p.optimized.inputs().begin(), p.optimized.inputs().end());
    external.insert(external.end(), p.optimized.outputs().begin(), p.optimized.outputs().end());
    state->slots = rt::cpu::assignSlots(state->kernels, external);
    checkArenaFits(p.optimized, *state);
  }
#endif
  p.states.emplace(key, state);
  return state;
}

// Each output value is written by the kernels once, into the first output that names it.
bool writtenByKernels(const ir::Graph& g, size_t j) {
  auto outputs = g.outputs();
  return g.node(outputs[j]).op != ir::OpCode::Input &&
         std::find(outputs.begin(), outputs.end(), outputs[j]) == outputs.begin() + j;
}

// Outputs that are graph inputs, or repeat an earlier output, are filled after the kernels by
// copy(dst, src, bytes).
template <class Copy>
void fillAliasedOutputs(const ir::Graph& g, std::span<const reference::TensorView> in,
                        std::span<const reference::MutTensorView> out, Copy&& copy) {
  auto outputs = g.outputs();
  for (size_t j = 0; j < out.size(); ++j) {
    size_t bytes = static_cast<size_t>(ir::dtypeBytes(out[j].dtype));
    for (int64_t d : out[j].shape) bytes *= static_cast<size_t>(d);
    if (bytes == 0 || writtenByKernels(g, j)) continue;
    if (g.node(outputs[j]).op == ir::OpCode::Input) {
      auto pos = std::find(g.inputs().begin(), g.inputs().end(), outputs[j]) - g.inputs().begin();
      copy(out[j].data, in[static_cast<size_t>(pos)].data, bytes);
    } else {
      auto first = std::find(outputs.begin(), outputs.end(), outputs[j]) - outputs.begin();
      copy(out[j].data, out[static_cast<size_t>(first)].data, bytes);
    }
  }
}

#if defined(STITCH_HAVE_LLVM)
// Runs the compiled kernels of `state` on the caller's tensors. Intermediates live in an arena of
// the state's pool; steady-state runs allocate nothing.
void runOnHost(const stitch_program_s& p, SignatureState& state,
               std::span<const reference::TensorView> in,
               std::span<const reference::MutTensorView> out) {
  const ir::Graph& g = p.optimized;
  rt::cpu::ArenaPool::Lease arena = state.arenas.acquire();
  thread_local rt::cpu::ValueBuffers values;
  values.clear();
  for (size_t i = 0; i < in.size(); ++i) values.bind(g.inputs()[i], const_cast<void*>(in[i].data));
  for (size_t j = 0; j < out.size(); ++j)
    if (writtenByKernels(g, j)) values.bind(g.outputs()[j], out[j].data);
  rt::cpu::runKernels(state.kernels, state.slots, values, *arena, rt::cpu::sharedPool());
  fillAliasedOutputs(
      g, in, out, [](void* dst, const void* src, size_t bytes) { std::memmove(dst, src, bytes); });
}
#endif

const void* dataOf(const DLTensor& t) { return static_cast<const char*>(t.data) + t.byte_offset; }

// Runs the GPU kernels of `state` on `stream`: the caller's device pointers for inputs and
// outputs, intermediates in the stream's arena. Outputs that are graph inputs, or repeat an
// earlier output, are device-to-device copies queued after the kernels.
void runOnGpu(const stitch_program_s& p, SignatureState& state,
              std::span<const reference::TensorView> in,
              std::span<const reference::MutTensorView> out, void* stream) {
  const ir::Graph& g = p.optimized;
  rt::gpu::GpuRuntime& gpu = gpuRuntime(p.config->backend);
  rt::gpu::Device& device = gpu.device();
  device.makeCurrent();
  bool aligned = true;
  auto check = [&](const void* ptr) {
    aligned = aligned && reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
  };
  thread_local std::vector<void*> values;
  values.assign(g.nodes().size(), nullptr);
  for (size_t i = 0; i < in.size(); ++i) {
    values[static_cast<size_t>(g.inputs()[i])] = const_cast<void*>(in[i].data);
    check(in[i].data);
  }
  for (size_t j = 0; j < out.size(); ++j)
    if (writtenByKernels(g, j)) {
      values[static_cast<size_t>(g.outputs()[j])] = out[j].data;
      check(out[j].data);
    }
  std::span<const std::shared_ptr<const rt::gpu::GpuKernel>> kernels;
  if (aligned) {
    kernels = state.gpuKernels[1];
  } else {
    std::lock_guard<std::mutex> lock(state.gpuMutex);
    if (state.gpuKernels[0].empty())
      for (const lower::KernelProgram& prog : state.programs)
        state.gpuKernels[0].push_back(gpu.kernel(prog, /*aligned=*/false));
    kernels = state.gpuKernels[0];
  }
  const rt::gpu::GpuArenas::Arena& arena =
      state.gpuArenas->forStream(stream, state.gpuSlots, state.cooperativeKernels);
  rt::gpu::runGpuKernels(device, kernels, state.gpuSlots, values, arena, stream);
  fillAliasedOutputs(g, in, out, [&](void* dst, const void* src, size_t bytes) {
    device.copyDeviceToDevice(dst, src, bytes, stream);
  });
}

stitch_cache_stats_t cacheStats(rt::Backend backend) {
#if defined(STITCH_HAVE_LLVM)
  if (backend == rt::Backend::Cpu) {
    rt::CacheStats c = rt::cpu::HostCompiler::instance().stats();
    return stitch_cache_stats_t{c.memoryHits, c.memoryMisses,   c.diskHits, c.diskMisses,
                                c.diskWrites, c.corruptEntries, c.compiles, c.compileSeconds};
  }
#endif
  if (isGpu(backend)) {
    rt::CacheStats c = gpuRuntime(backend).stats();
    return stitch_cache_stats_t{c.memoryHits, c.memoryMisses,   c.diskHits, c.diskMisses,
                                c.diskWrites, c.corruptEntries, c.compiles, c.compileSeconds};
  }
  return stitch_cache_stats_t{};
}

// The bytes [begin, end) a tensor view covers. Unchecked arithmetic is safe here: checkTensor
// bounded every tensor to 2^62 bytes (support/checked.h).
struct ByteRange {
  uintptr_t begin = 0, end = 0;
  bool empty() const { return begin == end; }
  bool overlaps(const ByteRange& o) const {
    return !empty() && !o.empty() && begin < o.end && o.begin < end;
  }
  bool operator==(const ByteRange& o) const = default;
};

ByteRange rangeOf(ir::DType dtype, std::span<const int64_t> shape, const void* data) {
  uint64_t bytes = static_cast<uint64_t>(ir::dtypeBytes(dtype));
  for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);
  auto begin = reinterpret_cast<uintptr_t>(data);
  return {begin, begin + bytes};
}

// Enforces stitch_program_run's aliasing contract (stitch.h) and returns, per output, the input
// whose memory it is exactly (-1: none). Kernels read inputs while other units write outputs, so
// any overlap other than an exact one cannot be made correct without copying the input first;
// it is refused rather than silently computed on half-overwritten data.
std::vector<int> checkAliasing(const ir::Graph& g, std::span<const reference::TensorView> in,
                               std::span<const reference::MutTensorView> out, rt::Backend backend) {
  std::vector<ByteRange> inRanges, outRanges;
  for (const auto& t : in) inRanges.push_back(rangeOf(t.dtype, t.shape, t.data));
  for (const auto& t : out) outRanges.push_back(rangeOf(t.dtype, t.shape, t.data));
  std::vector<int> exact(out.size(), -1);
  for (size_t j = 0; j < out.size(); ++j) {
    for (size_t k = 0; k < j; ++k)
      STITCH_CHECK(!outRanges[j].overlaps(outRanges[k]), ErrorCode::InvalidArgument,
                   "{} and {} share memory; outputs must not overlap each other", outputName(g, k),
                   outputName(g, j));
    for (size_t i = 0; i < in.size(); ++i) {
      if (!outRanges[j].overlaps(inRanges[i])) continue;
      STITCH_CHECK(outRanges[j] == inRanges[i], ErrorCode::InvalidArgument,
                   "{} partially overlaps {}; an output may be exactly an input's memory (in "
                   "place) or separate from it, nothing in between",
                   outputName(g, j), inputName(g, i));
      STITCH_CHECK(!isGpu(backend), ErrorCode::Unsupported,
                   "{} is the memory of {} (in place); the {} backend does not run in place in "
                   "this version: pass a separate output",
                   outputName(g, j), inputName(g, i), rt::backendName(backend));
      exact[j] = static_cast<int>(i);
    }
  }
  return exact;
}

// A host buffer for an in-place output: the run writes here, then the result is copied over the
// input it aliases.
struct StagedOutput {
  std::unique_ptr<void, decltype(&std::free)> data{nullptr, &std::free};
  size_t bytes = 0;
};

// Runs a program on checked tensor views: plans (and compiles) the signature on first use.
// Types are checked before aliasing, so a wrong dtype or shape is reported as such.
void runChecked(stitch_program_s& program, std::span<const reference::TensorView> in,
                std::span<const reference::MutTensorView> out, void* stream) {
  const ir::Graph& g = program.graph;
  rt::Backend backend = program.config->backend;
  std::vector<ir::ConcreteInput> sig;
  for (const auto& t : in) sig.push_back({t.dtype, t.shape});
  ir::Bindings b = ir::bindInputs(g, sig);
  for (size_t i = 0; i < out.size(); ++i) {
    const ir::Node& n = g.node(g.outputs()[i]);
    std::vector<int64_t> want = ir::concretize(n.type.shape, b);
    STITCH_CHECK(out[i].dtype == n.type.dtype &&
                     std::equal(want.begin(), want.end(), out[i].shape.begin(), out[i].shape.end()),
                 ErrorCode::ShapeMismatch, "{} must be {}[{}]", outputName(g, i),
                 ir::dtypeName(n.type.dtype), fmt::join(want, ", "));
  }
  std::vector<int> inPlace = checkAliasing(g, in, out, backend);
  // In-place outputs (host backends only): run into temporaries, then copy into place.
  std::vector<StagedOutput> staged(out.size());
  std::vector<reference::MutTensorView> runOut(out.begin(), out.end());
  for (size_t j = 0; j < out.size(); ++j) {
    if (inPlace[j] < 0) continue;
    ByteRange r = rangeOf(out[j].dtype, out[j].shape, out[j].data);
    staged[j].bytes = r.end - r.begin;
    staged[j].data.reset(std::aligned_alloc(64, (staged[j].bytes + 63) / 64 * 64));
    STITCH_CHECK(staged[j].data != nullptr, ErrorCode::OutOfMemory,
                 "cannot allocate {} bytes to run {} in place", staged[j].bytes, outputName(g, j));
    runOut[j].data = staged[j].data.get();
  }
  std::shared_ptr<SignatureState> state = stateFor(program, in);
  if (isGpu(backend)) {
    runOnGpu(program, *state, in, runOut, stream);
  } else if (backend == rt::Backend::Cpu) {
#if defined(STITCH_HAVE_LLVM)
    runOnHost(program, *state, in, runOut);
#else
    STITCH_INTERNAL(false, "the cpu backend was resolved in a build without LLVM");
#endif
  } else {
    reference::evaluate(g, in, runOut);
  }
  for (size_t j = 0; j < out.size(); ++j)
    if (inPlace[j] >= 0) std::memcpy(out[j].data, staged[j].data.get(), staged[j].bytes);
}

}  // namespace

extern "C" {

stitch_status_t stitch_engine_create(const char* const* keys, const char* const* values,
                                     size_t num_options, stitch_engine_t* out) {
  STITCH_API_REQUIRE(out);
  if (num_options) {
    STITCH_API_REQUIRE(keys);
    STITCH_API_REQUIRE(values);
  }
  STITCH_API_GUARD({
    configureLoggingFromEnv();
    std::string backend = env::getChoice("STITCH_BACKEND", rt::backendChoices()).value_or("auto");
    auto config = std::make_shared<api::EngineConfig>();
    config->fusion = fusion::modeFromEnv();
    for (const auto& [key, value] :
         api::readOptions(keys, values, num_options, kOptionKeys, "engine")) {
      if (key == "backend") backend = value;
      else config->fusion = fusion::parseMode(value);
    }
    config->backend = rt::resolveBackend(backend);
    if (auto dump = env::get("STITCH_DUMP")) {
      std::string item;
      std::stringstream list(*dump);
      while (std::getline(list, item, ',')) {
        STITCH_CHECK(
            std::find(kDumpChoices.begin(), kDumpChoices.end(), item) != kDumpChoices.end(),
            ErrorCode::InvalidArgument, "STITCH_DUMP={}: '{}' is not valid; valid values: {}",
            *dump, item, env::joinChoices(kDumpChoices));
        (item == "plan"     ? config->dumpPlan
         : item == "source" ? config->dumpSource
                            : config->dumpLlvm) = true;
      }
    }
    config->dumpDir = env::get("STITCH_DUMP_DIR").value_or(".");
    log().debug("engine created: backend {} (requested {}), fusion {}",
                rt::backendName(config->backend), backend, fusion::modeName(config->fusion));
    *out = api::publish(new stitch_engine_s{std::move(config)});
    return STITCH_OK;
  })
}

void stitch_engine_destroy(stitch_engine_t engine) {
  if (api::destroyCheck(engine, api::HandleKind::Engine, __func__)) delete engine;
}

stitch_status_t stitch_engine_device(stitch_engine_t engine, DLDevice* out) {
  STITCH_API_HANDLE(engine);
  STITCH_API_REQUIRE(out);
  rt::Backend b = engine->config->backend;
  *out = DLDevice{b == rt::Backend::Cuda ? kDLCUDA : b == rt::Backend::Hip ? kDLROCM : kDLCPU, 0};
  return STITCH_OK;
}

stitch_status_t stitch_engine_alloc(stitch_engine_t engine, size_t bytes, void** out) {
  STITCH_API_HANDLE(engine);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    rt::Backend b = engine->config->backend;
    if (isGpu(b)) {
      rt::gpu::Device& d = gpuRuntime(b).device();
      d.makeCurrent();
      *out = d.allocate(std::max<size_t>(bytes, 1));
    } else {
      // Checked before the round-up below, which would wrap SIZE_MAX to a tiny block.
      STITCH_CHECK(bytes <= static_cast<uint64_t>(hostMemoryBytes()), ErrorCode::OutOfMemory,
                   "stitch_engine_alloc: {} bytes is more than this machine's memory, {}", bytes,
                   bytesText(hostMemoryBytes()));
      void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
      STITCH_CHECK(p != nullptr, ErrorCode::OutOfMemory, "cannot allocate {} bytes", bytes);
      *out = p;
    }
    return STITCH_OK;
  })
}

void stitch_engine_free(stitch_engine_t engine, void* ptr) {
  if (!ptr) return;
  if (!api::isLive(engine)) {
    log().error("stitch_engine_free: engine is not a live stitch_engine_t; {} not freed", ptr);
    return;
  }
  try {
    rt::Backend b = engine->config->backend;
    if (isGpu(b)) {
      rt::gpu::Device& d = gpuRuntime(b).device();
      d.makeCurrent();
      d.release(ptr);
    } else {
      std::free(ptr);
    }
  } catch (const std::exception& e) {
    log().warn("stitch_engine_free: {}", e.what());
  }
}

stitch_status_t stitch_engine_copy(stitch_engine_t engine, void* dst, const void* src, size_t bytes,
                                   stitch_copy_kind_t kind, void* stream) {
  STITCH_API_HANDLE(engine);
  if (bytes) {
    STITCH_API_REQUIRE(dst);
    STITCH_API_REQUIRE(src);
  }
  STITCH_API_GUARD({
    const int64_t k = api::enumValue(kind);
    STITCH_CHECK(k == STITCH_COPY_HOST_TO_DEVICE || k == STITCH_COPY_DEVICE_TO_HOST ||
                     k == STITCH_COPY_DEVICE_TO_DEVICE,
                 ErrorCode::InvalidArgument, "unknown copy kind {}", k);
    if (bytes == 0) return STITCH_OK;
    rt::Backend b = engine->config->backend;
    if (!isGpu(b)) {
      std::memmove(dst, src, bytes);
      return STITCH_OK;
    }
    rt::gpu::Device& d = gpuRuntime(b).device();
    d.makeCurrent();
    if (kind == STITCH_COPY_HOST_TO_DEVICE) d.copyToDevice(dst, src, bytes, stream);
    else if (kind == STITCH_COPY_DEVICE_TO_HOST) d.copyToHost(dst, src, bytes, stream);
    else d.copyDeviceToDevice(dst, src, bytes, stream);
    if (kind != STITCH_COPY_DEVICE_TO_DEVICE) d.synchronize(stream);
    return STITCH_OK;
  })
}

stitch_status_t stitch_engine_synchronize(stitch_engine_t engine, void* stream) {
  STITCH_API_HANDLE(engine);
  STITCH_API_GUARD({
    rt::Backend b = engine->config->backend;
    if (isGpu(b)) {
      rt::gpu::Device& d = gpuRuntime(b).device();
      d.makeCurrent();
      d.synchronize(stream);
    }
    return STITCH_OK;
  })
}

stitch_status_t stitch_engine_cache_stats(stitch_engine_t engine, stitch_cache_stats_t* out) {
  STITCH_API_HANDLE(engine);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    *out = cacheStats(engine->config->backend);
    return STITCH_OK;
  })
}

const char* stitch_engine_backend(stitch_engine_t engine) {
  return api::isLive(engine) ? rt::backendName(engine->config->backend).data() : nullptr;
}

stitch_status_t stitch_program_compile(stitch_engine_t engine, stitch_graph_t graph,
                                       stitch_program_t* out) {
  STITCH_API_HANDLE(engine);
  STITCH_API_HANDLE(graph);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    const ir::Graph& g = graph->graph();
    ir::verify(g);
    auto p = std::make_unique<stitch_program_s>();
    p->config = engine->config;
    p->graph = g;
    p->optimized = passes::runPasses(g);
    *out = api::publish(p.release());
    log().debug("compiled graph {} ({} ops) for backend {}", g.name(), g.numOps(),
                rt::backendName(engine->config->backend));
    return STITCH_OK;
  })
}

void stitch_program_destroy(stitch_program_t program) {
  if (api::destroyCheck(program, api::HandleKind::Program, __func__)) delete program;
}

size_t stitch_program_num_inputs(stitch_program_t program) {
  return api::isLive(program) ? program->graph.inputs().size() : 0;
}

size_t stitch_program_num_outputs(stitch_program_t program) {
  return api::isLive(program) ? program->graph.outputs().size() : 0;
}

stitch_status_t stitch_program_output_shape(stitch_program_t program, const DLTensor* inputs,
                                            size_t num_inputs, size_t output_index, int64_t* shape,
                                            size_t max_rank, size_t* rank) {
  STITCH_API_HANDLE(program);
  if (num_inputs) STITCH_API_REQUIRE(inputs);
  STITCH_API_REQUIRE(rank);
  if (max_rank) STITCH_API_REQUIRE(shape);
  STITCH_API_GUARD({
    const ir::Graph& g = program->graph;
    STITCH_CHECK(output_index < g.outputs().size(), ErrorCode::InvalidArgument,
                 "output index {} is out of range (graph {} has {} outputs)", output_index,
                 g.name(), g.outputs().size());
    ir::Bindings b = ir::bindInputs(g, signatureOf(*program, inputs, num_inputs));
    std::vector<int64_t> dims = ir::concretize(g.node(g.outputs()[output_index]).type.shape, b);
    *rank = dims.size();
    for (size_t i = 0; i < dims.size() && i < max_rank; ++i) shape[i] = dims[i];
    return STITCH_OK;
  })
}

stitch_status_t stitch_program_run(stitch_program_t program, const DLTensor* inputs,
                                   size_t num_inputs, DLTensor* outputs, size_t num_outputs,
                                   void* stream) {
  STITCH_API_HANDLE(program);
  if (num_inputs) STITCH_API_REQUIRE(inputs);
  if (num_outputs) STITCH_API_REQUIRE(outputs);
  STITCH_API_GUARD({
    const ir::Graph& g = program->graph;
    rt::Backend backend = program->config->backend;
    STITCH_CHECK(num_inputs == g.inputs().size(), ErrorCode::ShapeMismatch,
                 "graph {} takes {} inputs, but {} were given", g.name(), g.inputs().size(),
                 num_inputs);
    STITCH_CHECK(num_outputs == g.outputs().size(), ErrorCode::ShapeMismatch,
                 "graph {} has {} outputs, but {} output tensors were given", g.name(),
                 g.outputs().size(), num_outputs);
    std::vector<reference::TensorView> in;
    for (size_t i = 0; i < num_inputs; ++i) {
      const DLTensor& t = inputs[i];
      ir::DType dt = checkTensor(t, inputName(g, i), backend);
      in.push_back({dt, std::span<const int64_t>(t.shape, t.ndim), dataOf(t)});
    }
    std::vector<reference::MutTensorView> out;
    for (size_t i = 0; i < num_outputs; ++i) {
      DLTensor& t = outputs[i];
      ir::DType dt = checkTensor(t, outputName(g, i), backend);
      out.push_back({dt, std::span<const int64_t>(t.shape, t.ndim),
                     static_cast<char*>(t.data) + t.byte_offset});
    }
    runChecked(*program, in, out, stream);
    return STITCH_OK;
  })
}

}  // extern "C"
