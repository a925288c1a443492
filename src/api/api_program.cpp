// Programs in the C API: per-signature state, the pipeline through the compile driver, runs.
//
// A program holds the graph as given (the reference backend runs it, unfused: it is the oracle),
// the graph after the passes (what the driver plans and emits), and what was made for each input
// signature so far: the driver's build of it, loaded by the engine's backend. DLPack arguments
// are checked by api_dlpack.h before anything else; the backend then sees plain buffers.
//
// Repeat runs. Checking a run in full (binding the graph's symbols, concretizing every output
// shape, the signature key and its lookup) costs several times what the kernels of a small piece
// take, and a caller such as the PyTorch hook repeats the same tensor descriptions call after
// call. So a run that passed every check leaves a RunSignature: each tensor's DLPack dtype,
// device and shape, and the signature's state. A later run whose tensors are described exactly
// so (compared field by field, never assumed) is known to pass the same checks, save the ones
// that read what may differ between calls with equal descriptions: strides (compact), data (not
// NULL unless empty) and aliasing. Those are checked again on every run; a run with any overlap
// between tensors, or one that matches no kept signature, takes the checked path, which gives
// the same errors as before. The program keeps its RunSignatures until it is destroyed, so the
// lock-free `last` may point at one: the repeat check is one atomic load and a comparison.
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

#include "api/api_autotune.h"
#include "api/api_dlpack.h"
#include "api/api_internal.h"
#include "driver/driver.h"
#include "driver/program_entry.h"
#include "driver/tuning.h"
#include "fusion/explain.h"
#include "ir/signature.h"
#include "lower/size_args.h"
#include "reference/interpreter.h"
#include "runtime/support/hash.h"
#include "runtime/support/logging.h"

using namespace stitch;

namespace {

// What a program makes for one input signature on its first run: the backend's executable of
// the driver's artifacts (null on the reference backend, which interprets the graph).
struct SignatureState {
  std::shared_ptr<rt::Executable> executable;
};

// One tensor of a run that passed every check, as its DLTensor described it.
struct CheckedTensor {
  DLDataType dltype;
  DLDevice device;
  ir::DType dtype;
  std::vector<int64_t> shape;
  size_t bytes = 0;
};

// The tensors of a run that passed every check, and the state of their signature (the repeat
// path: note at the top). Immutable once made.
struct RunSignature {
  std::vector<CheckedTensor> inputs, outputs;
  std::shared_ptr<SignatureState> state;
};

}  // namespace

struct stitch_program_s {
  std::shared_ptr<const api::EngineConfig> config;
  ir::Graph graph;
  ir::Graph optimized;
  // optimized's plans, kept per shape class (fusion/plan_cache.h): a new signature of a known
  // class re-prices a kept plan instead of searching.
  std::unique_ptr<fusion::PlanCache> plans;
  std::mutex mutex;  // guards states and warmStarts
  std::map<std::string, std::shared_ptr<SignatureState>> states;
  // Signatures whose artifact came from a whole-program entry (driver/program_entry.h).
  uint64_t warmStarts = 0;
  // Autotuning (driver/tuning.h), guarded by `mutex` too.
  stitch_program_tuning_t tuning{};
  // Its own lock, so that a repeat run never waits for another signature's compile (stateFor
  // holds `mutex` while the driver builds).
  std::mutex checkedMutex;  // guards checked
  // Every RunSignature so far, by descriptionKey(): never removed before the program is.
  std::map<std::vector<int64_t>, std::unique_ptr<const RunSignature>> checked;
  // The RunSignature of the latest run that found or made one (null before the first).
  std::atomic<const RunSignature*> last{nullptr};
};

namespace {

const void* dataOf(const DLTensor& t) { return static_cast<const char*>(t.data) + t.byte_offset; }

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

// Writes the dump files (STITCH_DUMP, or the engine option "dump") of one signature's build:
// GRAPH.SIGNATURE-HASH.WHAT, one set per signature. The generated code is each kernel's preferred
// form: CUDA/HIP C++ ("source"), or LLVM IR before optimization ("llvm"): exactly what the backend
// compiles.
void dump(const stitch_program_s& p, const std::string& key, const driver::Build& b,
          const std::string& tuning = {}) {
  const api::EngineConfig& c = *p.config;
  const uint64_t h = fnv1a64(key);
  auto write = [&](const char* what, const std::string& suffix, const std::string& text) {
    std::string path = fmt::format("{}/{}.{:016x}.{}", c.dump.dir, p.graph.name(), h, suffix);
    std::ofstream f(path);
    f << text;
    if (!f) log().warn("dump {}: cannot write {}", what, path);
    else log().info("dump {}: wrote {}", what, path);
  };
  if (c.dump.plan) {
    // Which shape class each kernel ran as (lower/size_args.h): its code's key, shared by every
    // signature of the class, and the size arguments this signature passes it.
    std::string classes;
    for (size_t i = 0; i < b.artifact.kernels.size(); ++i) {
      const rt::KernelArtifact& k = b.artifact.kernels[i];
      classes +=
          fmt::format("# kernel {} ({}): code {:016x}, ", i, k.name, k.forms.at(0).key.hash());
      classes += k.sizes.empty() ? std::string("sizes compiled in\n")
                                 : "shape class, size arguments " +
                                       lower::sizeArgsText(b.programs.at(i)) + "\n";
    }
    // And which plan class it used: the search ran for it, or a kept plan was re-priced.
    const fusion::PlanOrigin& o = b.planOrigin;
    std::string origin, searchedAt;
    for (const auto& [sym, size] : o.searchedAt)
      searchedAt += fmt::format("{}{}={}", searchedAt.empty() ? "" : ",", sym, size);
    if (o.reused)
      origin = fmt::format("# plan: class {}, the plan searched at {} re-priced for these sizes\n",
                           o.className, searchedAt);
    else if (!o.className.empty())
      origin = fmt::format("# plan: class {}, searched for these sizes\n", o.className);
    // Where the plan came from: the model's pick, or autotuning's measured choice.
    if (!tuning.empty()) origin += tuning;
    else if (!c.autotune.enabled) origin += "# plan: the cost model's pick (autotuning is off)\n";
    else
      origin += "# plan: the cost model's pick (this backend runs no kernels: nothing to tune)\n";
    write(
        "plan", "plan.txt",
        "# signature " + key + "\n" + origin + classes + fusion::explainText(p.optimized, b.plan));
  }
  // Each kernel's code in the file its language is written in: LLVM IR (STITCH_DUMP=llvm), or
  // the C-style source of the GPU targets and any other (STITCH_DUMP=source).
  for (size_t i = 0; i < b.artifact.kernels.size(); ++i) {
    const rt::KernelCode& code = b.artifact.kernels[i].forms.at(0);
    if (code.language == "llvm-ir") {
      if (c.dump.llvm) write("llvm", fmt::format("kernel{}.ll", i), code.text);
    } else if (c.dump.source) {
      write("source",
            fmt::format("kernel{}.{}", i,
                        code.language == "cuda"  ? "cu"
                        : code.language == "hip" ? "hip"
                                                 : "c"),
            code.text);
    }
  }
}

// The artifact of a whole-program entry (driver/program_entry.h) for this signature, or nullopt
// when the backend's persistent layers have none, or one that does not decode or is not a
// well-formed build of this graph and signature (logged and counted corrupt; the build that
// follows rewrites it). Nothing of it has been compiled or run when it is refused.
std::optional<rt::ProgramArtifact> warmArtifact(rt::PersistentLayers& layers,
                                                const rt::CacheKey& key, const ir::Graph& optimized,
                                                std::span<const ir::ConcreteInput> signature,
                                                const target::Target& target) {
  std::optional<std::vector<uint8_t>> bytes = layers.load(key, rt::EntryKind::Program);
  if (!bytes) return std::nullopt;
  try {
    rt::ProgramArtifact artifact = driver::decodeProgramArtifact(*bytes, target);
    driver::validateProgramArtifact(artifact, optimized, signature, target);
    return artifact;
  } catch (const Error& e) {
    layers.rejected(key, fmt::format("graph {}'s program entry", optimized.name()), e.what());
    return std::nullopt;
  }
}

// The state of a new signature with autotuning on: the decision of its tuned entry when one
// holds for this machine (another process or host measured it), else measured here
// (api_autotune.h) and stored for the fleet. Called with p.mutex held.
std::shared_ptr<SignatureState> tunedStateFor(stitch_program_s& p, const std::string& key,
                                              std::span<const ir::ConcreteInput> sig,
                                              const target::Target& target,
                                              const driver::Options& options,
                                              std::span<const reference::TensorView> inputs,
                                              void* stream) {
  const api::EngineConfig& c = *p.config;
  rt::Backend& backend = *c.backend;
  rt::PersistentLayers* layers = backend.persistentLayers();
  const bool dumping = c.dump.plan || c.dump.source || c.dump.llvm;
  const ir::Bindings bindings = ir::bindInputs(p.optimized, sig);
  auto state = std::make_shared<SignatureState>();
  std::optional<rt::CacheKey> entry;
  if (layers)
    entry =
        driver::tunedEntryKey(p.optimized, sig, backend.target(), options, c.autotune.candidates);
  if (entry) {
    if (std::optional<driver::TunedEntry> e =
            api::loadTunedEntry(*layers, *entry, p.optimized, sig, target, backend.target())) {
      const int chosen = e->record.chosen;
      try {
        if (dumping) {
          // What is dumped must be what runs: the chosen candidate built again, and run.
          driver::Build b =
              driver::build(p.optimized, bindings, target, {options.mode, chosen},
                            driver::Stage::Emit, chosen == 0 ? p.plans.get() : nullptr);
          dump(p, key, b, driver::tuningText(e->record, /*fromEntry=*/true));
          state->executable = backend.load(b.artifact);
        } else {
          state->executable = backend.load(e->artifact);
        }
      } catch (const Error& err) {
        layers->rejected(*entry, fmt::format("graph {}'s tuning entry", p.graph.name()),
                         err.what());
      }
      if (state->executable) {
        ++p.tuning.from_entries;
        ++p.warmStarts;  // an entry's plan and kernels, as a program entry's
        if (e->record.candidates.size() == 1) ++p.tuning.single_plan;
        if (chosen != 0) ++p.tuning.switched;
        log().debug("graph {}: signature {} runs candidate {}, its tuning entry's decision",
                    p.graph.name(), key, chosen);
        p.states.emplace(key, state);
        return state;
      }
    }
  }
  api::TunedSignature t = api::autotune(p.optimized, bindings, target, backend, options, c.autotune,
                                        p.plans.get(), inputs, stream);
  ++p.tuning.measured;
  if (t.record.candidates.size() == 1) ++p.tuning.single_plan;
  if (t.record.chosen != 0) ++p.tuning.switched;
  p.tuning.seconds += t.record.seconds;
  dump(p, key, t.build, driver::tuningText(t.record, /*fromEntry=*/false));
  state->executable = std::move(t.executable);
  if (entry)
    layers->store(*entry, driver::encodeTunedEntry(t.record, t.build.artifact),
                  rt::EntryKind::Tuned);
  p.states.emplace(key, state);
  return state;
}

// The state for this input signature, made on its first run, and later runs of the signature find
// it in the map. A whole-program entry of the backend's persistent layers gives the artifact with
// no planning (the backend's load() then finds the kernels in its cache); otherwise the driver
// builds it for the engine's backend (the plan only for the reference oracle), the entry is
// written, and the backend loads it. STITCH_DUMP builds every new signature, so that what is
// dumped is what runs.
std::shared_ptr<SignatureState> stateFor(stitch_program_s& p,
                                         std::span<const reference::TensorView> inputs,
                                         void* stream) {
  std::string key = signatureKey(inputs);
  std::lock_guard<std::mutex> lock(p.mutex);
  if (auto it = p.states.find(key); it != p.states.end()) return it->second;
  std::vector<ir::ConcreteInput> sig;
  for (const auto& t : inputs) sig.push_back({t.dtype, t.shape});
  rt::Backend& backend = *p.config->backend;
  const api::EngineConfig& c = *p.config;
  const std::unique_ptr<target::Target> target = target::makeTarget(backend.target());
  const bool oracle = !target->generatesCode();
  const driver::Options options{c.fusion, c.planCandidate};
  if (c.autotune.enabled && !oracle)
    return tunedStateFor(p, key, sig, *target, options, inputs, stream);
  auto state = std::make_shared<SignatureState>();
  rt::PersistentLayers* layers = oracle ? nullptr : backend.persistentLayers();
  std::optional<rt::CacheKey> entry;
  if (layers) entry = driver::programEntryKey(p.optimized, sig, backend.target(), options);
  if (entry && !(c.dump.plan || c.dump.source || c.dump.llvm)) {
    if (std::optional<rt::ProgramArtifact> artifact =
            warmArtifact(*layers, *entry, p.optimized, sig, *target)) {
      log().debug("graph {}: signature {} from its program entry ({} kernels)", p.graph.name(), key,
                  artifact->kernels.size());
      try {
        state->executable = backend.load(*artifact);
      } catch (const Error& e) {
        // What the checks cannot see (code that does not define what its entry says): a miss
        // too, never a failed run. A build that fails the same way fails below, as it would have.
        layers->rejected(*entry, fmt::format("graph {}'s program entry", p.graph.name()), e.what());
      }
      if (state->executable) {
        ++p.warmStarts;
        p.states.emplace(key, state);
        return state;
      }
    }
  }
  driver::Build build =
      driver::build(p.optimized, ir::bindInputs(p.optimized, sig), *target, options,
                    oracle ? driver::Stage::Plan : driver::Stage::Emit, p.plans.get());
  log().debug("graph {}: signature {} planned into {} kernels ({} ops)", p.graph.name(), key,
              build.plan.kernels.size(), p.optimized.numOps());
  dump(p, key, build);
  if (!oracle) state->executable = backend.load(build.artifact);
  // Written once the kernels loaded, so that an entry never names a kernel that failed.
  if (entry)
    layers->store(*entry, driver::encodeProgramArtifact(build.artifact), rt::EntryKind::Program);
  p.states.emplace(key, state);
  return state;
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
    if (bytes == 0 || api::writtenByKernels(g, j)) continue;
    if (g.node(outputs[j]).op == ir::OpCode::Input) {
      auto pos = std::find(g.inputs().begin(), g.inputs().end(), outputs[j]) - g.inputs().begin();
      copy(out[j].data, in[static_cast<size_t>(pos)].data, bytes);
    } else {
      auto first = std::find(outputs.begin(), outputs.end(), outputs[j]) - outputs.begin();
      copy(out[j].data, out[static_cast<size_t>(first)].data, bytes);
    }
  }
}

// Runs the loaded kernels of `state` on the caller's tensors (GPU: queued on `stream`), then
// fills the outputs the kernels do not write.
void runKernels(const stitch_program_s& p, SignatureState& state,
                std::span<const reference::TensorView> in,
                std::span<const reference::MutTensorView> out, void* stream) {
  const ir::Graph& g = p.optimized;
  thread_local std::vector<rt::BoundValue> bound;
  bound.clear();
  for (size_t i = 0; i < in.size(); ++i)
    bound.push_back({g.inputs()[i], const_cast<void*>(in[i].data)});
  for (size_t j = 0; j < out.size(); ++j)
    if (api::writtenByKernels(g, j)) bound.push_back({g.outputs()[j], out[j].data});
  state.executable->run(bound, stream);
  rt::Backend& backend = *p.config->backend;
  fillAliasedOutputs(g, in, out, [&](void* dst, const void* src, size_t bytes) {
    backend.copy(dst, src, bytes, rt::CopyKind::DeviceToDevice, stream);
  });
}

// A host buffer for an in-place output: the run writes here, then the result is copied over the
// input it aliases.
struct StagedOutput {
  std::unique_ptr<void, decltype(&std::free)> data{nullptr, &std::free};
  size_t bytes = 0;
};

// Runs a program on checked tensor views: plans (and compiles) the signature on first use, and
// returns its state. Types are checked before aliasing, so a wrong dtype or shape is reported as
// such.
std::shared_ptr<SignatureState> runChecked(stitch_program_s& program,
                                           std::span<const reference::TensorView> in,
                                           std::span<const reference::MutTensorView> out,
                                           void* stream) {
  const ir::Graph& g = program.graph;
  const rt::Backend& backend = *program.config->backend;
  std::vector<ir::ConcreteInput> sig;
  for (const auto& t : in) sig.push_back({t.dtype, t.shape});
  ir::Bindings b = ir::bindInputs(g, sig);
  for (size_t i = 0; i < out.size(); ++i) {
    const ir::Node& n = g.node(g.outputs()[i]);
    std::vector<int64_t> want = ir::concretize(n.type.shape, b);
    STITCH_CHECK(out[i].dtype == n.type.dtype &&
                     std::equal(want.begin(), want.end(), out[i].shape.begin(), out[i].shape.end()),
                 ErrorCode::ShapeMismatch, "{} must be {}[{}]", api::outputName(g, i),
                 ir::dtypeName(n.type.dtype), fmt::join(want, ", "));
  }
  std::vector<int> inPlace = api::checkAliasing(g, in, out, backend);
  // In-place outputs (host backends only): run into temporaries, then copy into place.
  std::vector<StagedOutput> staged(out.size());
  std::vector<reference::MutTensorView> runOut(out.begin(), out.end());
  for (size_t j = 0; j < out.size(); ++j) {
    if (inPlace[j] < 0) continue;
    staged[j].bytes = api::viewBytes(out[j].dtype, out[j].shape);
    staged[j].data.reset(std::aligned_alloc(64, (staged[j].bytes + 63) / 64 * 64));
    STITCH_CHECK(staged[j].data != nullptr, ErrorCode::OutOfMemory,
                 "cannot allocate {} bytes to run {} in place", staged[j].bytes,
                 api::outputName(g, j));
    runOut[j].data = staged[j].data.get();
  }
  std::shared_ptr<SignatureState> state = stateFor(program, in, stream);
  if (state->executable) runKernels(program, *state, in, runOut, stream);
  else reference::evaluate(g, in, runOut);  // the oracle runs the graph as given
  for (size_t j = 0; j < out.size(); ++j)
    if (inPlace[j] >= 0) std::memcpy(out[j].data, staged[j].data.get(), staged[j].bytes);
  return state;
}

// The repeat path (note at the top).

// The tensors' descriptions as one key of stitch_program_s::checked, into `key`: per tensor,
// inputs then outputs, its DLPack dtype, device, rank and dims. False (key unusable) for a tensor
// without a readable shape.
bool descriptionKey(std::span<const DLTensor> inputs, std::span<const DLTensor> outputs,
                    std::vector<int64_t>& key) {
  key.clear();
  for (std::span<const DLTensor> tensors : {inputs, outputs})
    for (const DLTensor& t : tensors) {
      if (t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr)) return false;
      key.insert(key.end(), {t.dtype.code, t.dtype.bits, t.dtype.lanes, t.device.device_type,
                             t.device.device_id, t.ndim});
      key.insert(key.end(), t.shape, t.shape + t.ndim);
    }
  return true;
}

// Whether `t` passes checkTensor as the tensor `c` was checked: the same description, and what
// may differ under an equal description valid too (strides compact, data set unless empty).
bool passesAs(const DLTensor& t, const CheckedTensor& c) {
  if (t.ndim != static_cast<int32_t>(c.shape.size()) || t.dtype.code != c.dltype.code ||
      t.dtype.bits != c.dltype.bits || t.dtype.lanes != c.dltype.lanes ||
      t.device.device_type != c.device.device_type || t.device.device_id != c.device.device_id)
    return false;
  if (t.ndim > 0 && (t.shape == nullptr || !std::equal(c.shape.begin(), c.shape.end(), t.shape)))
    return false;
  if (t.strides) {
    int64_t expect = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expect) return false;
      expect *= t.shape[i];  // bounded: the shape is one checkTensor accepted
    }
  }
  return t.data != nullptr || c.bytes == 0;
}

bool passesAs(std::span<const DLTensor> inputs, std::span<const DLTensor> outputs,
              const RunSignature& s) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!passesAs(inputs[i], s.inputs[i])) return false;
  for (size_t j = 0; j < outputs.size(); ++j)
    if (!passesAs(outputs[j], s.outputs[j])) return false;
  return true;
}

// Whether any output shares a byte with an input or another output. The repeat path runs only
// when none does; any sharing (an in-place run, or an error) is for checkAliasing to judge.
bool anyOverlap(std::span<const DLTensor> inputs, std::span<const DLTensor> outputs,
                const RunSignature& s) {
  auto begin = [](const DLTensor& t) {
    return reinterpret_cast<uintptr_t>(t.data) + static_cast<uintptr_t>(t.byte_offset);
  };
  auto overlap = [&](const DLTensor& a, size_t aBytes, const DLTensor& b, size_t bBytes) {
    return aBytes != 0 && bBytes != 0 && begin(a) < begin(b) + bBytes &&
           begin(b) < begin(a) + aBytes;
  };
  for (size_t j = 0; j < outputs.size(); ++j) {
    for (size_t k = 0; k < j; ++k)
      if (overlap(outputs[j], s.outputs[j].bytes, outputs[k], s.outputs[k].bytes)) return true;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (overlap(outputs[j], s.outputs[j].bytes, inputs[i], s.inputs[i].bytes)) return true;
  }
  return false;
}

// Runs the tensors on a kept signature when they pass as its tensors and overlap nothing; false
// when the run must take the checked path instead. The graph's counts are checked by the caller.
bool runRepeat(stitch_program_s& p, std::span<const DLTensor> inputs,
               std::span<const DLTensor> outputs, void* stream) {
  const RunSignature* s = p.last.load(std::memory_order_acquire);
  if (s == nullptr) return false;  // nothing checked yet
  if (!passesAs(inputs, outputs, *s)) {
    // Another kept signature (shapes that alternate, or threads running different ones)?
    thread_local std::vector<int64_t> key;
    if (!descriptionKey(inputs, outputs, key)) return false;
    {
      std::lock_guard<std::mutex> lock(p.checkedMutex);
      auto it = p.checked.find(key);
      if (it == p.checked.end()) return false;
      s = it->second.get();
    }
    if (!passesAs(inputs, outputs, *s)) return false;
    p.last.store(s, std::memory_order_release);
  }
  if (anyOverlap(inputs, outputs, *s)) return false;
  thread_local std::vector<reference::TensorView> in;
  thread_local std::vector<reference::MutTensorView> out;
  in.clear();
  out.clear();
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back({s->inputs[i].dtype, s->inputs[i].shape, dataOf(inputs[i])});
  for (size_t j = 0; j < outputs.size(); ++j)
    out.push_back({s->outputs[j].dtype, s->outputs[j].shape,
                   static_cast<char*>(outputs[j].data) + outputs[j].byte_offset});
  if (s->state->executable) runKernels(p, *s->state, in, out, stream);
  else reference::evaluate(p.graph, in, out);  // the oracle runs the graph as given
  return true;
}

// Keeps the tensors of a run that passed every check as a RunSignature (one per description),
// and makes it the program's last.
void remember(stitch_program_s& p, std::span<const DLTensor> inputs,
              std::span<const DLTensor> outputs, std::span<const reference::TensorView> in,
              std::span<const reference::MutTensorView> out,
              std::shared_ptr<SignatureState> state) {
  std::vector<int64_t> key;
  if (!descriptionKey(inputs, outputs, key)) return;  // cannot happen after checkTensor
  auto checked = [](const DLTensor& t, ir::DType dtype, std::span<const int64_t> shape) {
    return CheckedTensor{t.dtype, t.device, dtype, std::vector<int64_t>(shape.begin(), shape.end()),
                         api::viewBytes(dtype, shape)};
  };
  auto s = std::make_unique<RunSignature>();
  for (size_t i = 0; i < inputs.size(); ++i)
    s->inputs.push_back(checked(inputs[i], in[i].dtype, in[i].shape));
  for (size_t j = 0; j < outputs.size(); ++j)
    s->outputs.push_back(checked(outputs[j], out[j].dtype, out[j].shape));
  s->state = std::move(state);
  std::lock_guard<std::mutex> lock(p.checkedMutex);
  auto it = p.checked.try_emplace(std::move(key), std::move(s)).first;
  p.last.store(it->second.get(), std::memory_order_release);
}

}  // namespace

extern "C" {

stitch_status_t stitch_program_compile(stitch_engine_t engine, stitch_graph_t graph,
                                       stitch_program_t* out) {
  STITCH_API_HANDLE(engine);
  STITCH_API_HANDLE(graph);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    const ir::Graph& g = graph->graph();
    auto p = std::make_unique<stitch_program_s>();
    p->config = engine->config;
    p->graph = g;
    p->optimized = driver::optimize(g);
    p->plans = std::make_unique<fusion::PlanCache>(p->optimized);
    *out = api::publish(p.release());
    log().debug("compiled graph {} ({} ops) for backend {}", g.name(), g.numOps(),
                engine->config->backend->name());
    return STITCH_OK;
  })
}

void stitch_program_destroy(stitch_program_t program) {
  if (api::destroyCheck(program, api::HandleKind::Program, __func__)) delete program;
}

stitch_status_t stitch_program_stats(stitch_program_t program, stitch_program_stats_t* out) {
  STITCH_API_HANDLE(program);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    fusion::PlanCacheStats plans = program->plans->stats();
    uint64_t signatures = 0, warm = 0;
    {
      std::lock_guard<std::mutex> lock(program->mutex);
      signatures = program->states.size();
      warm = program->warmStarts;
    }
    // Signatures neither warm-started nor served by the plan cache were searched, whether the
    // cache was asked or not (STITCH_SHAPE_CLASSES=0, a static graph).
    const uint64_t planned = signatures - warm;
    const uint64_t reuses = std::min<uint64_t>(plans.reuses, planned);
    *out = stitch_program_stats_t{signatures, planned - reuses, reuses, plans.classes, warm};
    return STITCH_OK;
  })
}

stitch_status_t stitch_program_tuning(stitch_program_t program, stitch_program_tuning_t* out) {
  STITCH_API_HANDLE(program);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    std::lock_guard<std::mutex> lock(program->mutex);
    *out = program->tuning;
    return STITCH_OK;
  })
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
    ir::Bindings b = ir::bindInputs(g, api::signatureOf(g, inputs, num_inputs));
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
    const rt::Backend& backend = *program->config->backend;
    STITCH_CHECK(num_inputs == g.inputs().size(), ErrorCode::ShapeMismatch,
                 "graph {} takes {} inputs, but {} were given", g.name(), g.inputs().size(),
                 num_inputs);
    STITCH_CHECK(num_outputs == g.outputs().size(), ErrorCode::ShapeMismatch,
                 "graph {} has {} outputs, but {} output tensors were given", g.name(),
                 g.outputs().size(), num_outputs);
    std::span<const DLTensor> inputSpan(inputs, num_inputs), outputSpan(outputs, num_outputs);
    if (runRepeat(*program, inputSpan, outputSpan, stream)) return STITCH_OK;
    std::vector<reference::TensorView> in;
    for (size_t i = 0; i < num_inputs; ++i) {
      const DLTensor& t = inputs[i];
      ir::DType dt = api::checkTensor(t, api::inputName(g, i), backend);
      in.push_back({dt, std::span<const int64_t>(t.shape, t.ndim), dataOf(t)});
    }
    std::vector<reference::MutTensorView> out;
    for (size_t i = 0; i < num_outputs; ++i) {
      DLTensor& t = outputs[i];
      ir::DType dt = api::checkTensor(t, api::outputName(g, i), backend);
      out.push_back({dt, std::span<const int64_t>(t.shape, t.ndim),
                     static_cast<char*>(t.data) + t.byte_offset});
    }
    std::shared_ptr<SignatureState> state = runChecked(*program, in, out, stream);
    remember(*program, inputSpan, outputSpan, in, out, std::move(state));
    return STITCH_OK;
  })
}

}  // extern "C"
