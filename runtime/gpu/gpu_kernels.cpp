// GPU kernels through the kernel cache (design note in gpu_kernels.h).
#include "runtime/gpu/gpu_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>

#include "lower/serialize.h"
#include "support/error.h"
#include "support/logging.h"

namespace stitch::rt::gpu {

namespace {

// FNV-1a 64 of every device header's name and text, length-prefixed: the headers are part of
// every translation unit. They are build constants (embedded from kernels_templates/), so a
// digest is enough where the program, which varies, is kept whole.
uint64_t deviceHeadersDigest() {
  static const uint64_t digest = [] {
    lower::CanonicalWriter w;
    for (const codegen::DeviceHeaderText& h : codegen::deviceHeaders()) {
      w.string(h.name);
      w.string(h.text);
    }
    return fnv1a64(w.bytes());
  }();
  return digest;
}

// One translation unit with the device templates as headers. The compiler logs spills itself.
DeviceBinary compileSource(const std::string& source, const std::string& arch,
                           DeviceCompiler& compiler) {
  static const std::vector<DeviceHeader> headers = deviceHeaderList();
  return compiler.compile(source, "stitch_kernel.cu", headers, arch);
}

}  // namespace

GpuCompilerId compilerId(const DeviceCompiler& compiler, const std::string& arch) {
  return GpuCompilerId{std::string(compiler.name()), compiler.version(), compiler.options(arch)};
}

CacheKey gpuKernelKey(const lower::KernelProgram& p, const codegen::GpuTarget& target,
                      const codegen::GpuEmitOptions& emit, const GpuCompilerId& compiler) {
  // Structured bindings name every member (as lower/serialize.cpp does): a field added to the
  // target, the options or the compiler id does not compile until it is part of the key.
  const auto& [arch, vendor, warpSize, smCount, maxThreadsPerBlock, computeCapability] = target;
  const auto& [aligned] = emit;
  const auto& [compilerName, compilerVersion, compilerOptions] = compiler;
  lower::CanonicalWriter options;
  options.length(compilerOptions.size());
  for (const std::string& o : compilerOptions) options.string(o);
  using lower::canonicalBytes;
  CacheKey key;
  key.add("backend", "gpu")
      .add("program", lower::serializeProgram(p))
      .add("arch", arch)
      .add("vendor", canonicalBytes(vendor))
      .add("dialect", vendor == codegen::GpuVendor::Amd ? "hip" : "cuda")
      .add("warp-size", canonicalBytes(warpSize))
      .add("sm-count", canonicalBytes(smCount))
      .add("max-threads-per-block", canonicalBytes(maxThreadsPerBlock))
      .add("compute-capability", canonicalBytes(computeCapability))
      .add("aligned", canonicalBytes(aligned))
      .add("compiler", compilerName)
      .add("compiler-version", compilerVersion)
      .add("compiler-options", options.take())
      .add("device-headers", canonicalBytes(deviceHeadersDigest()));
  return key;
}

std::vector<DeviceHeader> deviceHeaderList() {
  std::vector<DeviceHeader> out;
  for (const codegen::DeviceHeaderText& h : codegen::deviceHeaders())
    out.push_back(DeviceHeader{std::string(h.name), std::string(h.text)});
  return out;
}

CompiledProgram compileProgram(const lower::KernelProgram& p, const codegen::GpuTarget& target,
                               DeviceCompiler& compiler, bool aligned) {
  CompiledProgram r;
  r.source = codegen::emitGpuKernel(p, target, codegen::GpuEmitOptions{aligned});
  r.binary = compileSource(r.source.source, target.arch, compiler);
  return r;
}

GpuRuntime* GpuRuntime::get(Backend b, std::string* why) {
  STITCH_INTERNAL(b == Backend::Cuda || b == Backend::Hip, "not a GPU backend");
  // Made once per backend; a failure is remembered (the library or device will not appear).
  struct Slot {
    std::once_flag once;
    std::unique_ptr<GpuRuntime> runtime;
    std::string why;
  };
  static Slot slots[2];
  Slot& s = slots[b == Backend::Cuda ? 0 : 1];
  std::call_once(s.once, [&] {
    std::string reason;
    Device* device = b == Backend::Cuda ? cudaDevice(&reason) : hipDevice(&reason);
    if (!device) {
      s.why = reason;
      return;
    }
    DeviceCompiler* compiler =
        b == Backend::Cuda ? nvrtcCompiler(&reason) : hiprtcCompiler(&reason);
    if (!compiler) {
      s.why = reason;
      return;
    }
    try {
      s.runtime.reset(new GpuRuntime(device, compiler));
    } catch (const std::exception& e) {
      s.why = e.what();
    }
  });
  if (!s.runtime && why) *why = s.why;
  return s.runtime.get();
}

GpuRuntime::GpuRuntime(Device* device, DeviceCompiler* compiler)
    : device_(device), compiler_(compiler), target_(codegen::gpuTarget(device->arch())) {
  target_.smCount = device->smCount();
  target_.warpSize = device->warpSize();
  compilerId_ = compilerId(*compiler_, target_.arch);
  cache_ = KernelCache<LoadedCode>::fromEnv(/*memoryCapacity=*/4096);
  log().debug("{} backend: {} ({} multiprocessors, warp {}), compiler {}", device->backend(),
              target_.arch, target_.smCount, target_.warpSize, compiler->name());
}

std::shared_ptr<const GpuKernel> GpuRuntime::kernel(const lower::KernelProgram& p, bool aligned) {
  const codegen::GpuEmitOptions options{aligned};
  const CacheKey key = gpuKernelKey(p, target_, options, compilerId_);
  // Emitted on a miss only (compile, or loading a disk entry); both run on this thread.
  std::optional<codegen::GpuKernelSource> emitted;
  auto source = [&]() -> const codegen::GpuKernelSource& {
    if (!emitted) emitted = codegen::emitGpuKernel(p, target_, options);
    return *emitted;
  };

  auto compile = [&]() -> std::vector<uint8_t> {
    DeviceBinary bin = compileSource(source().source, target_.arch, *compiler_);
    log().debug("compiled {} kernel {:016x} in {:.1f} ms ({} registers, {} bytes)", target_.arch,
                key.hash(), bin.seconds * 1e3, bin.registers, bin.bytes.size());
    return std::move(bin.bytes);
  };
  auto load = [&](const std::vector<uint8_t>& bytes) -> std::shared_ptr<LoadedCode> {
    const codegen::GpuKernelSource& src = source();
    device_->makeCurrent();
    auto k = std::make_shared<LoadedCode>();
    k->module = device_->loadModule(bytes);
    k->block = src.schedule.block;
    k->phases = src.phases;
    for (const codegen::GpuLaunch& l : src.phases)
      k->phaseFns.push_back(device_->function(k->module, l.function));
    void* first = k->phaseFns.at(0);
    k->registers = device_->functionAttribute(first, FunctionAttr::Registers);
    k->spillBytes = device_->functionAttribute(first, FunctionAttr::LocalBytes);
    if (!src.cooperative.function.empty() && device_->cooperativeLaunch()) {
      void* fn = device_->function(k->module, src.cooperative.function);
      int perSm = device_->maxActiveBlocksPerSm(fn, src.cooperative.block,
                                                static_cast<size_t>(src.cooperative.sharedBytes));
      int64_t resident = int64_t{perSm} * device_->smCount();
      if (resident > 0) {
        k->cooperativeFn = fn;
        k->cooperativeGrid = std::min(resident, src.cooperative.grid);
      }
    }
    return k;
  };
  auto kernel = std::make_shared<GpuKernel>();
  kernel->code = cache_->getOrCompile(key, compile, load);
  kernel->written.assign(p.params.size(), false);
  for (const lower::Phase& ph : p.phases)
    for (size_t b = static_cast<size_t>(ph.numInputs); b < ph.buffers.size(); ++b)
      kernel->written[static_cast<size_t>(ph.buffers[b])] = true;
  for (const lower::Param& q : p.params)
    kernel->params.push_back(cpu::KernelBuffer{q.value, q.scratch, q.dtype, q.elements});
  return kernel;
}

}  // namespace stitch::rt::gpu
