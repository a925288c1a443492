// GPU kernels: compile and load (design note in gpu_kernels.h).
#include "runtime/gpu/gpu_kernels.h"

#include <algorithm>

#include "support/error.h"

namespace stitch::rt::gpu {

GpuCompilerId compilerId(const DeviceCompiler& compiler, const std::string& arch) {
  return GpuCompilerId{std::string(compiler.name()), compiler.version(), compiler.options(arch)};
}

DeviceBinary compileCode(const KernelCode& code, const std::string& arch,
                         DeviceCompiler& compiler) {
  STITCH_INTERNAL(code.language != CodeLanguage::LlvmIr, "LLVM IR handed to {}", compiler.name());
  static const std::vector<DeviceHeader> none;
  return compiler.compile(code.text, "stitch_kernel.cu", code.headers ? *code.headers : none, arch);
}

std::shared_ptr<LoadedCode> loadCode(Device& device, const KernelCode& code,
                                     const std::vector<uint8_t>& binary) {
  device.makeCurrent();
  auto k = std::make_shared<LoadedCode>();
  k->module = device.loadModule(binary);
  k->phases = code.phases;
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
      k->cooperativeGrid = std::min(resident, coop.grid);
      k->cooperativeBlock = coop.block;
    }
  }
  return k;
}

}  // namespace stitch::rt::gpu
