// The reference backend: the oracle's engine. Host memory, and nothing to compile or load: the C
// API runs the reference interpreter (src/reference) on the graph itself, so this backend only
// gives it memory and a name.
#include "runtime/host_backend.h"
#include "runtime/support/error.h"

namespace stitch::rt {

namespace {

class ReferenceBackend final : public HostMemoryBackend {
 public:
  std::string_view name() const override { return "reference"; }
  const Target& target() const override { return target_; }
  std::shared_ptr<const void> compile(const KernelArtifact&) override {
    throwError(ErrorCode::Internal, "the reference backend interprets graphs; it compiles no code");
  }
  std::shared_ptr<Executable> load(const ProgramArtifact&) override {
    throwError(ErrorCode::Internal, "the reference backend interprets graphs; it loads no code");
  }
  CacheStats cacheStats() const override { return {}; }
  PersistentLayers* persistentLayers() override { return nullptr; }

 private:
  Target target_ = [] {
    Target t;
    t.backend = "reference";
    return t;
  }();
};

}  // namespace

namespace registration {

// Listed in runtime/CMakeLists.txt's built-in backends.
void reference() {
  registerBackend({"reference", /*autoRank=*/30,
                   [](std::string*) { return std::make_unique<ReferenceBackend>(); }});
}

}  // namespace registration

}  // namespace stitch::rt
