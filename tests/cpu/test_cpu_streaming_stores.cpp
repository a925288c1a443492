// runtime/cpu/streaming_stores.h on IR written by hand: which stores become non-temporal, the
// branch on alignment, the fence before returning, and what is left alone.
#include <gtest/gtest.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

#include "runtime/cpu/streaming_stores.h"

namespace {

constexpr const char* kModule = R"(
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

define void @phase(ptr noalias readonly %bufs, i64 %b, i64 %e) #0 {
entry:
  %p0 = load ptr, ptr %bufs, align 8
  %g1 = getelementptr inbounds ptr, ptr %bufs, i64 1
  %p1 = load ptr, ptr %g1, align 8
  %row = alloca [8 x float], align 32
  %v = load <8 x float>, ptr %p0, align 4
  %q1 = getelementptr float, ptr %p1, i64 %b
  store <8 x float> %v, ptr %q1, align 4
  %q2 = getelementptr float, ptr %p1, i64 16
  store <8 x float> %v, ptr %q2, align 32
  store float 1.0, ptr %p1, align 4
  store <8 x float> %v, ptr %p0, align 4
  store <8 x float> %v, ptr %row, align 32
  ret void
}

define void @plain(ptr noalias readonly %bufs, i64 %b, i64 %e) {
entry:
  %g1 = getelementptr inbounds ptr, ptr %bufs, i64 1
  %p1 = load ptr, ptr %g1, align 8
  %v = load <8 x float>, ptr %p1, align 4
  %q = getelementptr float, ptr %p1, i64 %b
  store <8 x float> %v, ptr %q, align 4
  ret void
}

attributes #0 = { "stitch-streaming-buffers"="1" }
)";

struct Counts {
  int nontemporal = 0;  // stores with !nontemporal, each 32-byte aligned
  int plain = 0;        // other stores
  int fences = 0;
};

Counts countIn(const llvm::Function& f) {
  Counts c;
  for (const llvm::BasicBlock& bb : f)
    for (const llvm::Instruction& in : bb) {
      if (const auto* st = llvm::dyn_cast<llvm::StoreInst>(&in)) {
        if (st->getMetadata(llvm::LLVMContext::MD_nontemporal)) {
          ++c.nontemporal;
          EXPECT_GE(st->getAlign().value(), 32u);
        } else {
          ++c.plain;
        }
      }
      if (const auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&in))
        c.fences += call->getIntrinsicID() == llvm::Intrinsic::x86_sse_sfence;
    }
  return c;
}

TEST(StreamingStores, RewriteTheVectorStoresThroughNamedBuffers) {
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic err;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(kModule, err, ctx);
  ASSERT_TRUE(m) << err.getMessage().str();
  EXPECT_EQ(stitch::rt::cpu::addStreamingStores(*m), 2);
  std::string problems;
  llvm::raw_string_ostream os(problems);
  EXPECT_FALSE(llvm::verifyModule(*m, &os)) << problems;

  // In @phase: the unaligned store became a branch (a non-temporal store and the plain one), the
  // aligned one is non-temporal as it is; the scalar store, the store through buffer 0 (not
  // named) and the one to the stack array stay plain. One fence before the return.
  Counts phase = countIn(*m->getFunction("phase"));
  EXPECT_EQ(phase.nontemporal, 2);
  EXPECT_EQ(phase.plain, 4);
  EXPECT_EQ(phase.fences, 1);
  // A function without the attribute is left alone.
  Counts plain = countIn(*m->getFunction("plain"));
  EXPECT_EQ(plain.nontemporal, 0);
  EXPECT_EQ(plain.plain, 1);
  EXPECT_EQ(plain.fences, 0);
}

}  // namespace
