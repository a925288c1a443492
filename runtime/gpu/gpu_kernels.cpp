// GPU kernels through the kernel cache (design note in gpu_kernels.h).
#include "runtime/gpu/gpu_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "support/error.h"
#include "support/logging.h"

namespace stitch::rt::gpu {

namespace {

// The compiler and its settings, as the cache key names them.
std::string compilerOptionsKey(const DeviceCompiler& c) { return std::string(c.name()) + "-O3"; }

// One translation unit with the device templates as headers. The compiler logs spills itself.
DeviceBinary compileSource(const std::string& source, const std::string& arch,
                           DeviceCompiler& compiler) {
  static const std::vector<DeviceHeader> headers = deviceHeaderList();
  return compiler.compile(source, "stitch_kernel.cu", headers, arch);
}

}  // namespace

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
  cache_ = KernelCache<LoadedCode>::fromEnv(/*memoryCapacity=*/4096);
  log().debug("{} backend: {} ({} multiprocessors, warp {}), compiler {}", device->backend(),
              target_.arch, target_.smCount, target_.warpSize, compiler->name());
}

std::shared_ptr<const GpuKernel> GpuRuntime::kernel(const lower::KernelProgram& p, bool aligned) {
  codegen::GpuKernelSource src =
      codegen::emitGpuKernel(p, target_, codegen::GpuEmitOptions{aligned});
  CacheKey key;
  key.graphFingerprint = fnv1a64(src.source);
  for (const lower::Param& q : p.params)
    key.inputs.push_back({q.dtype, {q.elements}, {}, aligned ? 16u : 1u});
  key.target = target_.arch;
  key.options = compilerOptionsKey(*compiler_);

  auto compile = [&]() -> std::vector<uint8_t> {
    DeviceBinary bin = compileSource(src.source, target_.arch, *compiler_);
    log().debug("compiled {} kernel {:016x} in {:.1f} ms ({} registers, {} bytes)", target_.arch,
                key.graphFingerprint, bin.seconds * 1e3, bin.registers, bin.bytes.size());
    return std::move(bin.bytes);
  };
  auto load = [&](const std::vector<uint8_t>& bytes) -> std::shared_ptr<LoadedCode> {
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
