// A GPU as the executor sees it: modules, launches, memory, streams' synchronization, timing.
//
// Two implementations: CUDA over the driver API (libcuda) and HIP over its module API
// (libamdhip64), both opened with dlopen, so a machine without a GPU stack gets nullptr and a
// reason from cudaDevice()/hipDevice(), never a crash. Each is process-wide and is device 0 of its
// API (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES choose which GPU that is); it is never destroyed,
// since tearing a context down from a static destructor races the driver's own shutdown.
//
// CUDA shares the device's primary context with the CUDA runtime and PyTorch: memory and streams
// from either work here. Every method makes that context (HIP: the device) current on the calling
// thread first, at the cost of one cuCtxGetCurrent, so thread-pool threads need no set-up.
//
// Handles are the APIs' own, as void*: a function is a CUfunction / hipFunction_t, a stream a
// CUstream / hipStream_t (nullptr is the legacy default stream), device pointers are plain
// addresses. Every driver error becomes a stitch::Error naming the call and the driver's error
// name and text: OutOfMemory for allocations, Compile when a module's code does not load,
// InvalidArgument for a missing kernel name or a bad launch shape, Unsupported for what the
// driver cannot do, Internal otherwise (a fault in a launched kernel is a bug in Stitch).
//
// Thread-safe: the drivers are, and the objects keep no mutable state of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "runtime/target.h"

namespace stitch::rt::gpu {

enum class FunctionAttr {
  MaxThreadsPerBlock,  // the most threads a block of this kernel may have
  Registers,           // per thread
  LocalBytes,          // per-thread local memory: the stack frame, spills included
  StaticSharedBytes,   // __shared__ arrays of fixed size
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string_view backend() const = 0;  // "cuda" / "hip"
  virtual const std::string& arch() const = 0;   // "sm_90" (from compute capability), "gfx90a"
  virtual const std::string& name() const = 0;   // "NVIDIA H100 80GB HBM3", for messages
  virtual int smCount() const = 0;               // SMs / CUs
  virtual int warpSize() const = 0;              // 32 / 64
  virtual bool cooperativeLaunch() const = 0;    // launchCooperative() works here
  // The most dynamic + static shared memory one block may use (CUDA: the opt-in limit; launch()
  // opts a kernel in when asked for more than the default 48 KiB).
  virtual size_t maxSharedPerBlock() const = 0;
  // The device's name, driver version and per-multiprocessor limits as the driver reports them
  // (memoryBandwidth 0: that is measured, device_profile.h). A field the driver does not report
  // is 0.
  virtual DeviceProfile queryProfile() = 0;

  // Makes the device's primary context current on the calling thread (cuDevicePrimaryCtxRetain
  // once, then cuCtxSetCurrent when another context is current; HIP: hipSetDevice). The methods
  // below do this themselves; call it before using the driver API directly on a new thread.
  virtual void makeCurrent() = 0;

  // Loads a cubin / code object (DeviceBinary::bytes). The module is unloaded when the last
  // shared_ptr goes; functions taken from it are valid only until then. Compile error when the
  // bytes are not an ELF image or the code is not for this device.
  virtual std::shared_ptr<const void> loadModule(std::span<const uint8_t> binary) = 0;
  // The kernel `name` (extern "C" or mangled) of a module; InvalidArgument when absent.
  virtual void* function(const std::shared_ptr<const void>& module, const std::string& name) = 0;

  // Launches fn on a 1-D grid of `grid` blocks (1 .. 2^31-1) of `block` threads, asynchronously on
  // `stream`. args[i] points at the value of the kernel's i-th parameter (cuLaunchKernel's
  // kernelParams).
  virtual void launch(void* fn, int64_t grid, int block, size_t sharedBytes, void* stream,
                      void** args) = 0;
  // The same with every block resident at once, so the kernel may synchronize the whole grid
  // (grid <= maxActiveBlocksPerSm * smCount). Unsupported when cooperativeLaunch() is false.
  virtual void launchCooperative(void* fn, int64_t grid, int block, size_t sharedBytes,
                                 void* stream, void** args) = 0;
  // How many blocks of fn fit on one SM at once with this block size and dynamic shared memory.
  virtual int maxActiveBlocksPerSm(void* fn, int block, size_t sharedBytes) = 0;
  virtual int functionAttribute(void* fn, FunctionAttr a) = 0;

  // Device memory, at least 256-byte aligned; OutOfMemory when it cannot be had. allocate(0)
  // returns nullptr, and release(nullptr) does nothing. release never throws (it runs in
  // destructors): a failure is logged.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;

  // Host <-> device copies: synchronous when stream is nullptr, else queued on the stream (the
  // host buffer must then stay alive until the stream reaches the copy).
  virtual void copyToDevice(void* dst, const void* src, size_t bytes, void* stream) = 0;
  virtual void copyToHost(void* dst, const void* src, size_t bytes, void* stream) = 0;
  // Device -> device, always queued on `stream` (nullptr: the default stream).
  virtual void copyDeviceToDevice(void* dst, const void* src, size_t bytes, void* stream) = 0;
  // Waits for `stream`; nullptr waits for all work on the device (cuCtxSynchronize).
  virtual void synchronize(void* stream) = 0;

  // Timing events (the CLI's --iters): create, record on a stream, read the milliseconds between
  // two recorded events (waiting for `end`). An event is destroyed with its last shared_ptr.
  virtual std::shared_ptr<void> createEvent() = 0;
  virtual void recordEvent(void* event, void* stream) = 0;
  virtual float elapsedMs(void* start, void* end) = 0;
};

// Process-wide device 0 of each API; nullptr, and *why ("libcuda.so.1 ... cannot open shared
// object file", "cuInit failed: CUDA_ERROR_NO_DEVICE (...)", "no CUDA device"), when unavailable.
// The first call opens the library and the device; later calls return the same answer.
Device* cudaDevice(std::string* why = nullptr);
Device* hipDevice(std::string* why = nullptr);

namespace detail {
// For the implementations: checks a launch's shape against the APIs' limits (InvalidArgument)
// and returns the grid as the unsigned they take.
unsigned checkLaunch(const Device& d, void* fn, int64_t grid, int block, size_t sharedBytes);
// Refuses anything but an ELF image before the driver sees it: both drivers take a bare pointer
// and would read non-ELF bytes as NUL-terminated PTX / text, past the end of the buffer.
void checkModule(const Device& d, std::span<const uint8_t> binary);
}  // namespace detail

}  // namespace stitch::rt::gpu
