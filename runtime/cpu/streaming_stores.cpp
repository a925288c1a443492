// Streaming stores after the optimizer (design note in streaming_stores.h).
#include "runtime/cpu/streaming_stores.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>

#include <cstdint>
#include <set>
#include <vector>

namespace stitch::rt::cpu {

namespace {

std::set<int64_t> streamedBuffers(const llvm::Function& f) {
  std::set<int64_t> out;
  llvm::Attribute a = f.getFnAttribute(llvm::StringRef(kStreamingBuffersAttr));
  if (!a.isStringAttribute()) return out;
  llvm::SmallVector<llvm::StringRef> parts;
  a.getValueAsString().split(parts, ',', -1, false);
  for (llvm::StringRef p : parts) {
    int64_t i = 0;
    if (!p.getAsInteger(10, i)) out.insert(i);
  }
  return out;
}

// The buffer index of a store's pointer: the pointer is derived from one loaded from the buffer
// array (argument 0) at a constant offset; -1 when it is anything else.
int64_t bufferOf(const llvm::StoreInst& st, const llvm::DataLayout& dl) {
  const auto* load =
      llvm::dyn_cast<llvm::LoadInst>(llvm::getUnderlyingObject(st.getPointerOperand(), 0));
  if (load == nullptr) return -1;
  llvm::APInt offset(dl.getIndexTypeSizeInBits(load->getPointerOperandType()), 0);
  const llvm::Value* base =
      load->getPointerOperand()->stripAndAccumulateConstantOffsets(dl, offset, true);
  const auto* arg = llvm::dyn_cast<llvm::Argument>(base);
  const int64_t slot = dl.getPointerSize();
  if (arg == nullptr || arg->getArgNo() != 0 || offset.getSExtValue() % slot != 0) return -1;
  return offset.getSExtValue() / slot;
}

llvm::MDNode* nontemporal(llvm::LLVMContext& c) {
  return llvm::MDNode::get(
      c, llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(c), 1)));
}

// Splits `st` into: aligned ? non-temporal store : the store as it was.
void stream(llvm::StoreInst* st, uint64_t bytes) {
  llvm::LLVMContext& c = st->getContext();
  if (st->getAlign().value() >= bytes) {
    st->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal(c));
    return;
  }
  llvm::IRBuilder<> b(st);
  llvm::Value* address = b.CreatePtrToInt(st->getPointerOperand(), b.getInt64Ty());
  llvm::Value* aligned = b.CreateICmpEQ(b.CreateAnd(address, bytes - 1), b.getInt64(0));
  llvm::Instruction* then = nullptr;
  llvm::Instruction* otherwise = nullptr;
  llvm::SplitBlockAndInsertIfThenElse(aligned, st, &then, &otherwise);
  auto* fast = llvm::cast<llvm::StoreInst>(st->clone());
  fast->setAlignment(llvm::Align(bytes));
  fast->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal(c));
  fast->insertBefore(then);
  st->moveBefore(otherwise);
}

}  // namespace

int addStreamingStores(llvm::Module& m) {
  const llvm::DataLayout& dl = m.getDataLayout();
  int rewritten = 0;
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    const std::set<int64_t> buffers = streamedBuffers(f);
    if (buffers.empty()) continue;
    std::vector<std::pair<llvm::StoreInst*, uint64_t>> stores;
    for (llvm::BasicBlock& bb : f) {
      for (llvm::Instruction& in : bb) {
        auto* st = llvm::dyn_cast<llvm::StoreInst>(&in);
        if (st == nullptr || st->isVolatile() || !st->getValueOperand()->getType()->isVectorTy())
          continue;
        const uint64_t bytes = dl.getTypeStoreSize(st->getValueOperand()->getType());
        if ((bytes != 16 && bytes != 32 && bytes != 64) || !buffers.count(bufferOf(*st, dl)))
          continue;
        stores.emplace_back(st, bytes);
      }
    }
    if (stores.empty()) continue;
    for (auto [st, bytes] : stores) stream(st, bytes);
    rewritten += static_cast<int>(stores.size());
    std::vector<llvm::ReturnInst*> returns;
    for (llvm::BasicBlock& bb : f)
      if (auto* r = llvm::dyn_cast<llvm::ReturnInst>(bb.getTerminator())) returns.push_back(r);
    for (llvm::ReturnInst* r : returns)
      llvm::IRBuilder<>(r).CreateIntrinsic(llvm::Intrinsic::x86_sse_sfence, {}, {});
  }
  return rewritten;
}

}  // namespace stitch::rt::cpu
