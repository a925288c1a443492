// Cache keys of kernel code (design note in keys.h).
#include "target/keys.h"

#include "lower/serialize.h"
#if defined(STITCH_HAVE_LLVM)
#include "codegen/llvm/llvm_emitter.h"
#endif
#include "runtime/support/hash.h"
#include "target/gpu/gpu_schedule.h"

namespace stitch::target {

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

}  // namespace

rt::CacheKey hostKernelKey(const std::string& keyText, const rt::HostTarget& target,
                           const rt::HostCompileOptions& options) {
  const auto& [triple, cpu, features, llvmVersion] = target;
  const auto& [optLevel, mathLibrary, streamingStoreBytes] = options;
  rt::CacheKey key;
  key.add("backend", "cpu")
      .add("code", keyText)
      .add("triple", triple)
      .add("cpu", cpu)
      .add("features", features)
      .add("llvm-version", llvmVersion)
      .add("opt-level", lower::canonicalBytes(optLevel))
      .add("math-library", mathLibrary)
      .add("streaming-store-bytes", lower::canonicalBytes(streamingStoreBytes));
  return key;
}

#if defined(STITCH_HAVE_LLVM)
rt::CacheKey hostKernelKey(const lower::KernelProgram& p, const rt::HostTarget& target,
                           const rt::HostCompileOptions& options) {
  const codegen::NamedIR ir =
      codegen::namedProgramIR(p, [](const std::string&) { return std::string("stitch_kernel"); });
  return hostKernelKey(ir.keyText, target, options);
}
#endif

rt::CacheKey gpuKernelKey(const std::string& source, const codegen::GpuTarget& target,
                          const codegen::GpuEmitOptions& emit, const rt::GpuCompilerId& compiler) {
  const auto& [arch, dialect, warpSize, smCount, maxThreadsPerBlock, computeCapability] = target;
  const auto& [aligned] = emit;
  const auto& [compilerName, compilerVersion, compilerOptions] = compiler;
  lower::CanonicalWriter options;
  options.length(compilerOptions.size());
  for (const std::string& o : compilerOptions) options.string(o);
  using lower::canonicalBytes;
  rt::CacheKey key;
  key.add("backend", "gpu")
      .add("code", source)
      .add("arch", arch)
      .add("dialect", dialect)
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

rt::CacheKey gpuKernelKey(const lower::KernelProgram& p, const codegen::GpuTarget& target,
                          const codegen::GpuEmitOptions& options,
                          const rt::GpuCompilerId& compiler) {
  return gpuKernelKey(
      codegen::emitGpuKernel(scheduledFor(p, target, options.aligned), target, options).source,
      target, options, compiler);
}

}  // namespace stitch::target
