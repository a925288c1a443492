// Tests that run emulated GPU kernels (gpu/gpu_emulator.h) switch fiber stacks with swapcontext,
// which the sanitizers do not follow: they run in the default lane (the emulated kernels are not
// instrumented code anyway) and skip, saying so, under ASan and TSan.
#pragma once

#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SKIP_UNDER_SANITIZERS() \
  GTEST_SKIP() << "stack-switching fibers under a sanitizer; the default CI lane runs this"
#else
#define SKIP_UNDER_SANITIZERS() (void)0
#endif
