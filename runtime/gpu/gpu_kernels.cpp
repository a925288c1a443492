// GPU kernels: compile and load (design note in gpu_kernels.h).
#include "runtime/gpu/gpu_kernels.h"

#include <algorithm>

#include "runtime/support/error.h"

namespace stitch::rt::gpu {

GpuCompilerId compilerId(const DeviceCompiler& compiler, const std::string& arch) {
  return GpuCompilerId{std::string(compiler.name()), compiler.version(), compiler.options(arch)};
}

DeviceBinary compileCode(const KernelCode& code, const std::string& arch,
                         DeviceCompiler& compiler) {
  STITCH_INTERNAL(code.language == compiler.language(), "{} code handed to {}", code.language,
                  compiler.name());
  static const std::vector<DeviceHeader> none;
  return compiler.compile(code.text, "stitch_kernel.cu", code.headers ? *code.headers : none, arch);
}

std::shared_ptr<LoadedCode> loadCode(Device& device, const KernelCode& code,
                                     const std::vector<uint8_t>& binary) {
  device.makeCurrent();
  auto k = std::make_shared<LoadedCode>();
  k->module = device.loadModule(binary);
  for (const EntryPoint& e : code.phases)
    k->phaseFns.push_back(device.function(k->module, e.symbol));
  void* first = k->phaseFns.at(0);
  k->registers = device.functionAttribute(first, FunctionAttr::Registers);
  k->spillBytes = device.functionAttribute(first, FunctionAttr::LocalBytes);
  const EntryPoint& coop = code.cooperative;
  if (!coop.symbol.empty() && device.cooperativeLaunch()) {
    void* fn = device.function(k->module, coop.symbol);
    int perSm = device.maxActiveBlocksPerSm(fn, coop.block, static_cast<size_t>(coop.sharedBytes));
    int64_t resident = int64_t{perSm} * device.smCount();
    if (resident > 0) {
      k->cooperativeFn = fn;
      k->residentBlocks = resident;
    }
  }
  return k;
}

std::shared_ptr<GpuKernel> makeGpuKernel(const KernelArtifact& a, size_t form,
                                         std::shared_ptr<const LoadedCode> code) {
  const KernelCode& c = a.forms.at(form);
  auto kernel = std::make_shared<GpuKernel>();
  kernel->params = a.params;
  kernel->written.assign(a.params.size(), false);
  for (const PhaseBuffers& ph : a.phases)
    for (size_t b = static_cast<size_t>(ph.numInputs); b < ph.params.size(); ++b)
      kernel->written[static_cast<size_t>(ph.params[b])] = true;
  kernel->sizes = a.sizes;
  kernel->checks = a.checks;
  kernel->phases = c.phases;
  // A grid barrier needs every block resident: the grid is at most what fits at once (its loops
  // stride over the rest).
  kernel->cooperativeGrid = std::min(code->residentBlocks, c.cooperative.grid);
  kernel->cooperativeBlock = c.cooperative.block;
  kernel->code = std::move(code);
  return kernel;
}

}  // namespace stitch::rt::gpu
