// One driver runs both NVRTC and hipRTC (their APIs are the same shape, rtc_api.h); the two
// compilers differ only in their options, how an arch is spelled, and where the register and
// spill figures come from (the ptxas log, or the code object's metadata).
#include "runtime/gpu/device_compiler.h"

#include <time.h>

#include <chrono>
#include <mutex>

#include "runtime/gpu/hip_api.h"
#include "runtime/gpu/nvrtc_api.h"
#include "runtime/gpu/resource_usage.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::rt::gpu {

std::string numberLines(std::string_view source) {
  std::string out;
  int line = 1;
  size_t begin = 0;
  while (begin < source.size()) {
    size_t end = source.find('\n', begin);
    if (end == std::string_view::npos) end = source.size();
    out += fmt::format("{:5} | {}\n", line++, source.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

namespace {

using Program = RtcFunctions::Program;

double threadCpuSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

class RtcCompiler : public DeviceCompiler {
 public:
  RtcCompiler(std::string_view name, std::string_view language, const RtcFunctions& fns,
              bool serialize)
      : name_(name), language_(language), fns_(fns), serialize_(serialize) {}

  std::string_view name() const override { return name_; }
  std::string_view language() const override { return language_; }
  std::string version() const override {
    int major = 0, minor = 0;
    fns_.version(&major, &minor);
    return fmt::format("{}.{}", major, minor);
  }
  std::vector<std::string> options(const std::string& arch) const override {
    return archOptions(arch);
  }

  DeviceBinary compile(const std::string& source, const std::string& programName,
                       const std::vector<DeviceHeader>& headers, const std::string& arch,
                       const std::vector<std::string>& extraOptions) override {
    STITCH_CHECK(targets(arch), ErrorCode::InvalidArgument,
                 "{} cannot compile for '{}': expected an architecture like {}", name_, arch,
                 archExample());
    std::vector<std::string> options = archOptions(arch);
    options.insert(options.end(), extraOptions.begin(), extraOptions.end());
    std::vector<const char*> optionPtrs, headerTexts, headerNames;
    for (const std::string& o : options) optionPtrs.push_back(o.c_str());
    for (const DeviceHeader& h : headers) {
      headerTexts.push_back(h.text.c_str());
      headerNames.push_back(h.name.c_str());
    }

    std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
    if (serialize_) lock.lock();
    auto start = std::chrono::steady_clock::now();
    const double cpuStart = threadCpuSeconds();

    Program program = nullptr;
    int r = fns_.createProgram(&program, source.c_str(), programName.c_str(),
                               static_cast<int>(headers.size()), headerTexts.data(),
                               headerNames.data());
    STITCH_CHECK(r == RtcFunctions::kSuccess, ErrorCode::Compile,
                 "{}: creating program '{}' failed: {}", name_, programName, fns_.errorString(r));
    struct Destroy {
      const RtcFunctions& fns;
      Program& program;
      ~Destroy() { fns.destroyProgram(&program); }
    } destroy{fns_, program};

    r = fns_.compileProgram(program, static_cast<int>(optionPtrs.size()), optionPtrs.data());
    std::string compilerLog = tidyLog(programLog(program), programName);
    if (r != RtcFunctions::kSuccess)
      throwError(ErrorCode::Compile,
                 failureMessage(programName, arch, options, r, compilerLog, source, headers));

    DeviceBinary binary;
    size_t size = 0;
    r = fns_.getCodeSize(program, &size);
    STITCH_CHECK(r == RtcFunctions::kSuccess && size > 0, ErrorCode::Compile,
                 "{}: '{}' compiled for {} but yielded no code: {}", name_, programName, arch,
                 fns_.errorString(r));
    binary.bytes.resize(size);
    r = fns_.getCode(program, reinterpret_cast<char*>(binary.bytes.data()));
    STITCH_CHECK(r == RtcFunctions::kSuccess, ErrorCode::Compile,
                 "{}: reading the code of '{}' failed: {}", name_, programName,
                 fns_.errorString(r));
    binary.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    binary.cpuSeconds = threadCpuSeconds() - cpuStart;

    binary.arch = arch;
    binary.log = std::move(compilerLog);
    ResourceUsage usage = resourceUsage(binary);
    binary.registers = usage.registers;
    binary.spillBytes = usage.spillBytes;
    log().debug("{}: compiled '{}' for {} in {:.1f} ms: {} bytes, {} registers, {} bytes stack",
                name_, programName, arch, binary.seconds * 1e3, binary.bytes.size(),
                binary.registers, usage.stackBytes);
    if (binary.spillBytes > 0)
      log().warn(
          "{}: '{}' for {} spills registers ({} bytes of spills reported, {} registers per "
          "thread); expect it to run slower",
          name_, programName, arch, binary.spillBytes, binary.registers);
    return binary;
  }

 protected:
  virtual bool targets(const std::string& arch) const = 0;
  virtual std::string_view archExample() const = 0;
  virtual std::vector<std::string> archOptions(const std::string& arch) const = 0;
  virtual ResourceUsage resourceUsage(const DeviceBinary& binary) const = 0;
  virtual std::string tidyLog(std::string text, const std::string& /*programName*/) const {
    return text;
  }

 private:
  std::string programLog(Program program) const {
    size_t size = 0;
    if (fns_.getProgramLogSize(program, &size) != RtcFunctions::kSuccess || size == 0) return {};
    std::string text(size, '\0');
    if (fns_.getProgramLog(program, text.data()) != RtcFunctions::kSuccess) return {};
    // The size counts a terminating NUL; trailing blank lines carry nothing either.
    while (!text.empty() && (text.back() == '\0' || text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    return text;
  }

  std::string failureMessage(const std::string& programName, const std::string& arch,
                             const std::vector<std::string>& options, int result,
                             const std::string& compilerLog, const std::string& source,
                             const std::vector<DeviceHeader>& headers) const {
    std::string joined;
    for (const std::string& o : options) joined += " " + o;
    std::string msg = fmt::format("{}: compiling '{}' for {} failed ({}; options:{})\n", name_,
                                  programName, arch, fns_.errorString(result), joined);
    msg += compilerLog.empty() ? std::string("(the compiler wrote no log)\n") : compilerLog + "\n";
    msg += fmt::format("--- source of '{}' ---\n{}", programName, numberLines(source));
    // Headers the log points into, so an error inside one can be read too.
    for (const DeviceHeader& h : headers)
      if (compilerLog.find(h.name) != std::string::npos)
        msg += fmt::format("--- header '{}' ---\n{}", h.name, numberLines(h.text));
    return msg;
  }

  std::string_view name_;
  std::string_view language_;
  const RtcFunctions& fns_;
  bool serialize_;
  std::mutex mutex_;
};

class NvrtcCompiler final : public RtcCompiler {
 public:
  explicit NvrtcCompiler(const RtcFunctions& fns) : RtcCompiler("nvrtc", "cuda", fns, false) {
    int major = 0, minor = 0;
    fns.version(&major, &minor);
    // NVRTC 12.9+ keeps compiled code in the driver's ComputeCache (~/.nv) when libcuda is
    // present, and a hit skips ptxas, so the log loses the register and spill figures. Stitch's
    // own kernel cache sits above this layer; a compile that reaches NVRTC wants the figures.
    noCache_ = major > 12 || (major == 12 && minor >= 9);
    // --minimal (NVRTC 12.4+) leaves out what generated kernels never use: texture and surface
    // functions, the cudadevrt runtime functions (cudaMalloc & co.), device-side launch, and the
    // CUDA runtime's types. It shortens the front end of every compile, most of all the first in a
    // process (BENCHMARKS.md, "Cold compile"); the cubin is byte for byte the same.
    minimal_ = major > 12 || (major == 12 && minor >= 4);
    log().debug("nvrtc: version {}.{} from {}", major, minor, nvrtc::libraryPath());
  }

 protected:
  bool targets(const std::string& arch) const override {
    // sm_80, sm_90, sm_90a: a real architecture, so NVRTC emits cubin rather than PTX.
    if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return false;
    size_t digits = arch.find_first_not_of("0123456789", 3);
    return digits > 3 && (digits == std::string::npos || digits + 1 == arch.size());
  }
  std::string_view archExample() const override { return "sm_80 or sm_90"; }
  std::vector<std::string> archOptions(const std::string& arch) const override {
    // No --use_fast_math: results must match the reference within 1e-4. ptxas -v puts register
    // and spill figures in the log.
    std::vector<std::string> options = {"--std=c++17", "--gpu-architecture=" + arch,
                                        "--ptxas-options=-v"};
    if (noCache_) options.push_back("--no-cache");
    if (minimal_) options.push_back("--minimal");
    return options;
  }
  ResourceUsage resourceUsage(const DeviceBinary& binary) const override {
    return parsePtxasLog(binary.log);
  }

 private:
  bool noCache_ = false;
  bool minimal_ = false;
};

class HiprtcCompiler final : public RtcCompiler {
 public:
  // Serialized: hipRTC runs one compile at a time internally anyway (ROCm/hip#3826), and comgr,
  // under it, was not reliably thread-safe in the ROCm 5 era (ROCm-CompilerSupport#27).
  explicit HiprtcCompiler(const RtcFunctions& fns) : RtcCompiler("hiprtc", "hip", fns, true) {}

 protected:
  bool targets(const std::string& arch) const override {
    return arch.size() > 3 && arch.compare(0, 3, "gfx") == 0;
  }
  std::string_view archExample() const override { return "gfx90a"; }
  std::vector<std::string> archOptions(const std::string& arch) const override {
    // hipRTC defaults to C++14; NVRTC sources are C++17, and the two share one emitter.
    return {"--offload-arch=" + arch, "-std=c++17"};
  }
  ResourceUsage resourceUsage(const DeviceBinary& binary) const override {
    return readAmdgpuResourceUsage(binary.bytes).value_or(ResourceUsage{});
  }
  // comgr names the source "/tmp/comgr-XXXXXX/input/CompileSource"; show the program's name.
  std::string tidyLog(std::string text, const std::string& programName) const override {
    constexpr std::string_view kSuffix = "/input/CompileSource";
    for (size_t at = text.find(kSuffix); at != std::string::npos; at = text.find(kSuffix, at)) {
      size_t begin = at;
      while (begin > 0 && text[begin - 1] != ' ' && text[begin - 1] != '\n') --begin;
      text.replace(begin, at + kSuffix.size() - begin, programName);
      at = begin + programName.size();
    }
    return text;
  }
};

}  // namespace

DeviceCompiler* nvrtcCompiler(std::string* why) {
#if !defined(STITCH_HAVE_CUDA)
  if (why)
    *why = "this build of Stitch has no CUDA support (configured with STITCH_ENABLE_CUDA=OFF)";
  return nullptr;
#endif
  const RtcFunctions* fns = nvrtc::api(why);
  if (fns == nullptr) return nullptr;
  static NvrtcCompiler instance(*fns);
  return &instance;
}

DeviceCompiler* hiprtcCompiler(std::string* why) {
#if !defined(STITCH_HAVE_HIP)
  if (why) *why = "this build of Stitch has no HIP support (configured with STITCH_ENABLE_HIP=OFF)";
  return nullptr;
#endif
  const RtcFunctions* fns = hip::rtc(why);
  if (fns == nullptr) return nullptr;
  static HiprtcCompiler instance(*fns);
  return &instance;
}

}  // namespace stitch::rt::gpu
