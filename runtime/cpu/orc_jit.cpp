#include "runtime/cpu/orc_jit.h"

#include <fmt/format.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <sleef.h>

#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "runtime/cpu/streaming_stores.h"
#include "runtime/cpu/vector_math.h"
#include "runtime/support/env.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::rt::cpu {

void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

// Captures every object the JIT compiles, by module identifier, for compileToObject().
class ObjectCapture : public llvm::ObjectCache {
 public:
  void notifyObjectCompiled(const llvm::Module* m, llvm::MemoryBufferRef obj) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!wanted_.count(m->getModuleIdentifier())) return;
    objects_[m->getModuleIdentifier()] =
        std::vector<char>(obj.getBufferStart(), obj.getBufferEnd());
  }
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module*) override { return nullptr; }

  void want(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    wanted_.insert(id);
  }
  std::optional<std::vector<char>> take(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    wanted_.erase(id);
    auto it = objects_.find(id);
    if (it == objects_.end()) return std::nullopt;
    std::vector<char> out = std::move(it->second);
    objects_.erase(it);
    return out;
  }

 private:
  std::mutex mu_;
  std::set<std::string> wanted_;
  std::map<std::string, std::vector<char>> objects_;
};

namespace {

llvm::OptimizationLevel passLevel(int level) {
  switch (level) {
    case 0: return llvm::OptimizationLevel::O0;
    case 1: return llvm::OptimizationLevel::O1;
    case 2: return llvm::OptimizationLevel::O2;
    default: return llvm::OptimizationLevel::O3;
  }
}

llvm::CodeGenOptLevel codegenLevel(int level) {
  switch (level) {
    case 0: return llvm::CodeGenOptLevel::None;
    case 1: return llvm::CodeGenOptLevel::Less;
    case 2: return llvm::CodeGenOptLevel::Default;
    default: return llvm::CodeGenOptLevel::Aggressive;
  }
}

// The optimizer of the IR transform layer: the new pass manager's pipeline at `level`, with the
// host TargetMachine's cost model.
class Optimizer {
 public:
  Optimizer(std::unique_ptr<llvm::TargetMachine> tm, int level)
      : tm_(std::move(tm)), level_(level), vectorMath_(sleefVectorMappings(*tm_)) {}
  void run(llvm::Module& m) {
    std::lock_guard<std::mutex> lock(mu_);
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = level_ >= 2;
    pto.SLPVectorization = level_ >= 2;
    llvm::PassBuilder pb(tm_.get(), pto);
    // SLEEF's vector functions for the libm ones the emitter calls (vector_math.h):
    // registered before the defaults, so this TargetLibraryInfo wins.
    llvm::TargetLibraryInfoImpl tlii(tm_->getTargetTriple());
    tlii.addVectorizableFunctions(vectorMath_);
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = level_ == 0
                                      ? pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0)
                                      : pb.buildPerModuleDefaultPipeline(passLevel(level_));
    mpm.run(m, mam);
    if (tm_->getTargetTriple().isX86()) {
      if (int n = addStreamingStores(m))
        log().debug("{}: {} vector stores made streaming", m.getModuleIdentifier(), n);
    }
  }

 private:
  std::mutex mu_;
  std::unique_ptr<llvm::TargetMachine> tm_;
  int level_;
  std::vector<llvm::VecDesc> vectorMath_;
};

// SLEEF's version: the math library names it in cache keys.
std::string sleefVersion() {
  return "sleef " + std::to_string(SLEEF_VERSION_MAJOR) + "." +
         std::to_string(SLEEF_VERSION_MINOR) + "." + std::to_string(SLEEF_VERSION_PATCHLEVEL);
}

}  // namespace

std::vector<std::string> cpuFeaturesFromEnv() {
  std::optional<std::string> value = env::get(kCpuFeaturesEnv);
  if (!value) return {};
  const char* valid =
      "a comma list of +FEATURE or -FEATURE, LLVM's names for the host (e.g. -avx512f)";
  initializeNativeTarget();
  const std::string triple = llvm::sys::getProcessTriple();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  STITCH_INTERNAL(target != nullptr, "no LLVM target for the host ({}): {}", triple, error);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple, "", ""));
  STITCH_INTERNAL(sti != nullptr, "no subtarget information for the host ({})", triple);
  std::set<std::string, std::less<>> known;
  for (const llvm::SubtargetFeatureKV& f : sti->getAllProcessorFeatures()) known.insert(f.Key);
  std::vector<std::string> out;
  std::string_view rest = *value;
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (item.size() < 2 || (item[0] != '+' && item[0] != '-'))
      env::throwInvalid(kCpuFeaturesEnv, *value, valid);
    if (!known.count(item.substr(1)))
      env::throwInvalid(
          kCpuFeaturesEnv, *value,
          fmt::format("{} ('{}' is not a feature of {})", valid, item.substr(1), triple));
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

llvm::Expected<std::unique_ptr<OrcJit>> OrcJit::Create(int optLevel) {
  initializeNativeTarget();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return jtmb.takeError();
  // Later entries win in LLVM's feature strings: the variable's changes go after the host's.
  jtmb->addFeatures(cpuFeaturesFromEnv());
  jtmb->setCodeGenOptLevel(codegenLevel(optLevel));
  auto tm = jtmb->createTargetMachine();
  if (!tm) return tm.takeError();
  auto capture = std::make_unique<ObjectCapture>();
  ObjectCapture* cache = capture.get();
  auto jit =
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(*jtmb)
          .setCompileFunctionCreator(
              [cache](llvm::orc::JITTargetMachineBuilder b)
                  -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
                return std::make_unique<llvm::orc::ConcurrentIRCompiler>(std::move(b), cache);
              })
          .create();
  if (!jit) return jit.takeError();
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!gen) return gen.takeError();
  (*jit)->getMainJITDylib().addGenerator(std::move(*gen));
  // libm and SLEEF by address, not through the process (vector_math.h says why).
  llvm::orc::SymbolMap sleef;
  for (const auto& [name, addr] : mathSymbols())
    sleef[(*jit)->mangleAndIntern(name)] = llvm::orc::ExecutorSymbolDef(
        llvm::orc::ExecutorAddr(addr),
        llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  if (auto err = (*jit)->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(sleef))))
    return err;
  auto optimizer = std::make_shared<Optimizer>(std::move(*tm), optLevel);
  (*jit)->getIRTransformLayer().setTransform(
      [optimizer](llvm::orc::ThreadSafeModule m, const llvm::orc::MaterializationResponsibility&)
          -> llvm::Expected<llvm::orc::ThreadSafeModule> {
        m.withModuleDo([&](llvm::Module& mod) { optimizer->run(mod); });
        return m;
      });
  return std::unique_ptr<OrcJit>(
      new OrcJit(std::move(*jit), std::move(capture), optLevel, sleefVersion()));
}

OrcJit::OrcJit(std::unique_ptr<llvm::orc::LLJIT> jit, std::unique_ptr<ObjectCapture> capture,
               int optLevel, std::string mathLibrary)
    : capture_(std::move(capture)),
      jit_(std::move(jit)),
      optLevel_(optLevel),
      mathLibrary_(std::move(mathLibrary)) {}

OrcJit::~OrcJit() {
  if (jit_) llvm::consumeError(jit_->getExecutionSession().endSession());
}

llvm::Expected<llvm::orc::ResourceTrackerSP> OrcJit::addModule(llvm::orc::ThreadSafeModule m) {
  auto rt = jit_->getMainJITDylib().createResourceTracker();
  if (auto err = jit_->addIRModule(rt, std::move(m))) return err;
  return rt;
}

llvm::Expected<void*> OrcJit::lookup(std::string_view name) {
  auto addr = jit_->lookup(llvm::StringRef(name.data(), name.size()));
  if (!addr) return addr.takeError();
  return addr->toPtr<void*>();
}

llvm::Error OrcJit::remove(const llvm::orc::ResourceTrackerSP& rt) { return rt->remove(); }

llvm::Expected<std::vector<char>> OrcJit::compileToObject(llvm::orc::ThreadSafeModule m,
                                                          std::string_view symbol) {
  std::string id = m.withModuleDo([](llvm::Module& mod) { return mod.getModuleIdentifier(); });
  capture_->want(id);
  auto rt = addModule(std::move(m));
  if (!rt) return rt.takeError();
  auto addr = lookup(symbol);
  llvm::Error removed = (*rt)->remove();
  if (!addr) {
    llvm::consumeError(std::move(removed));
    capture_->take(id);
    return addr.takeError();
  }
  if (removed) return removed;
  auto obj = capture_->take(id);
  if (!obj)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no object was captured for module " + id);
  return std::move(*obj);
}

llvm::Expected<llvm::orc::ResourceTrackerSP> OrcJit::loadObject(const std::vector<char>& object,
                                                                std::string_view name) {
  auto rt = jit_->getMainJITDylib().createResourceTracker();
  auto buf = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()),
                                                  llvm::StringRef(name.data(), name.size()));
  if (auto err = jit_->addObjectFile(rt, std::move(buf))) return err;
  return rt;
}

}  // namespace stitch::rt::cpu
