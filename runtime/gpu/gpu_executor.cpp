// The GPU executor (design note in gpu_executor.h).
#include "runtime/gpu/gpu_executor.h"

#include <algorithm>
#include <vector>

#include "runtime/index_checks.h"
#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch::rt::gpu {

namespace {
constexpr size_t kSlotAlignment = 256;  // cudaMalloc's alignment; any vector access is legal
size_t alignUp(size_t x) { return (x + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment; }
}  // namespace

SlotPlan planGpuSlots(std::span<const std::shared_ptr<const GpuKernel>> kernels,
                      std::span<const int> external) {
  std::vector<std::vector<KernelBuffer>> reads(kernels.size()), writes(kernels.size());
  std::vector<SlotStep> steps;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const GpuKernel& g = *kernels[k];
    for (size_t i = 0; i < g.params.size(); ++i)
      (g.written[i] ? writes[k] : reads[k]).push_back(g.params[i]);
    steps.push_back({reads[k], writes[k]});
  }
  return planSlots(steps, external);
}

GpuArenas::~GpuArenas() {
  for (auto& [stream, a] : arenas_) {
    if (!a.base) continue;
    try {
      device_.synchronize(stream);
      device_.release(a.base);
    } catch (...) {
      // The context may be gone at exit; nothing more can be done.
    }
  }
}

GpuArenas::Arena& GpuArenas::forStream(void* stream, const SlotPlan& plan, int barriers,
                                       int checked) {
  std::lock_guard<std::mutex> lock(mu_);
  Arena& a = arenas_[stream];
  std::vector<size_t> offsets;
  size_t total = 0;
  for (int64_t b : plan.slotBytes) {
    offsets.push_back(total);
    total += alignUp(static_cast<size_t>(std::max<int64_t>(b, 1)));
    // Each slot is within 2^62 bytes (support/checked.h); their sum is checked as it grows.
    STITCH_CHECK(total <= static_cast<size_t>(kMaxTensorBytes), ErrorCode::OutOfMemory,
                 "the intermediates of a program need more than 2^62 bytes of device memory");
  }
  // The barrier words, then the status words: one zeroed region after the slots.
  size_t barrierOffset = total;
  size_t statusOffset =
      barrierOffset + alignUp(static_cast<size_t>(barriers) * 2 * sizeof(uint32_t));
  size_t barrierBytes = statusOffset - barrierOffset +
                        static_cast<size_t>(checked) * kCheckStatusWords * sizeof(int64_t);
  total += alignUp(std::max<size_t>(barrierBytes, 1));
  if (total > a.bytes) {
    if (a.base) {
      device_.synchronize(stream);  // queued kernels may still use the old memory
      device_.release(a.base);
      a.base = nullptr;
      a.bytes = 0;
    }
    size_t grown = std::max(total, a.bytes + a.bytes / 2);
    a.base = device_.allocate(grown);
    a.bytes = grown;
    std::vector<uint8_t> zeros(grown - barrierOffset, 0);
    device_.copyToDevice(static_cast<char*>(a.base) + barrierOffset, zeros.data(), zeros.size(),
                         nullptr);
  } else if (barrierOffset != a.barrierOffset || statusOffset != a.statusOffset) {
    // A new layout puts the barrier or status words elsewhere: zero them there (ordered on the
    // stream).
    std::vector<uint8_t> zeros(std::max<size_t>(barrierBytes, 1), 0);
    device_.synchronize(stream);
    device_.copyToDevice(static_cast<char*>(a.base) + barrierOffset, zeros.data(), zeros.size(),
                         nullptr);
  }
  a.offsets = std::move(offsets);
  a.barrierOffset = barrierOffset;
  a.statusOffset = statusOffset;
  return a;
}

void runGpuKernels(Device& device, std::span<const std::shared_ptr<const GpuKernel>> kernels,
                   const SlotPlan& plan, std::vector<void*>& values, const GpuArenas::Arena& arena,
                   void* stream, bool cooperative) {
  char* base = static_cast<char*>(arena.base);
  for (size_t id = 0; id < plan.valueSlot.size(); ++id) {
    int s = plan.valueSlot[id];
    if (s < 0) continue;
    if (values.size() <= id) values.resize(id + 1, nullptr);
    values[id] = base + arena.offsets[static_cast<size_t>(s)];
  }
  auto scratch = [&](int index) -> void* {
    STITCH_INTERNAL(index >= 0 && static_cast<size_t>(index) < plan.scratchSlot.size() &&
                        plan.scratchSlot[static_cast<size_t>(index)] >= 0,
                    "scratch {} has no arena slot", index);
    return base + arena.offsets[static_cast<size_t>(plan.scratchSlot[static_cast<size_t>(index)])];
  };
  // Argument storage: the pointers, then the addresses the driver reads them from (the buffers',
  // the size arguments', the barrier's).
  thread_local std::vector<void*> pointers;
  thread_local std::vector<void*> args;
  uint32_t* barrier = reinterpret_cast<uint32_t*>(base + arena.barrierOffset);
  int64_t* status = reinterpret_cast<int64_t*>(base + arena.statusOffset);
  for (const auto& k : kernels) {
    pointers.clear();
    for (const KernelBuffer& b : k->params) {
      void* p = b.value >= 0 ? (static_cast<size_t>(b.value) < values.size()
                                    ? values[static_cast<size_t>(b.value)]
                                    : nullptr)
                             : scratch(b.scratch);
      STITCH_INTERNAL(p != nullptr || b.elements == 0, "value %{} has no device pointer", b.value);
      pointers.push_back(p);
    }
    const LoadedCode& c = *k->code;
    bool coop = cooperative && c.cooperativeFn;
    const bool checks = !k->checks.empty();
    if (checks) {
      pointers.push_back(status);
      status += kCheckStatusWords;
    }
    if (coop) pointers.push_back(barrier);
    args.clear();
    for (size_t i = 0; i < k->params.size() + (checks ? 1 : 0); ++i) args.push_back(&pointers[i]);
    // The driver copies each parameter's bytes at launch: the kernel's own values are stable.
    for (const int64_t& s : k->sizes) args.push_back(const_cast<int64_t*>(&s));
    if (coop) {
      args.push_back(&pointers.back());  // the barrier, last
      device.launchCooperative(c.cooperativeFn, k->cooperativeGrid, k->cooperativeBlock, 0, stream,
                               args.data());
      barrier += 2;
      continue;
    }
    for (size_t i = 0; i < k->phases.size(); ++i)
      device.launch(c.phaseFns[i], k->phases[i].grid, k->phases[i].block, 0, stream, args.data());
  }
}

void checkGpuIndices(Device& device, std::span<const std::shared_ptr<const GpuKernel>> kernels,
                     const GpuArenas::Arena& arena, void* stream, std::string_view program) {
  size_t checked = 0;
  for (const auto& k : kernels) checked += k->checks.empty() ? 0 : 1;
  if (checked == 0) return;
  thread_local std::vector<int64_t> words;
  words.assign(checked * kCheckStatusWords, 0);
  char* at = static_cast<char*>(arena.base) + arena.statusOffset;
  device.copyToHost(words.data(), at, words.size() * sizeof(int64_t), stream);
  device.synchronize(stream);
  size_t w = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i]->checks.empty()) continue;
    std::span<const int64_t> mine(words.data() + w, kCheckStatusWords);
    w += kCheckStatusWords;
    if (mine[0] == 0) continue;
    const std::vector<int64_t> failed(mine.begin(), mine.end());
    std::fill(words.begin(), words.end(), 0);
    device.copyToDevice(at, words.data(), words.size() * sizeof(int64_t), stream);
    device.synchronize(stream);
    throwCheckFailure(failed, kernels[i]->checks, program, i);
  }
}

}  // namespace stitch::rt::gpu
