// The reference target: what the oracle's engine plans with. The reference backend runs graphs in
// the interpreter (src/reference), so this target prices plans for the built-in host profile (for
// `stitch plan` and the oracle's Stage::Plan builds) and generates no code.
#include "runtime/support/error.h"
#include "target/target.h"

namespace stitch::target {

namespace {

fusion::HardwareProfile builtinHost() {
  std::optional<fusion::HardwareProfile> profile = fusion::findProfile("host");
  STITCH_INTERNAL(profile.has_value(), "no built-in host profile");
  return *profile;
}

class ReferenceTarget final : public Target {
 public:
  explicit ReferenceTarget(const rt::Target& t) : Target(t, builtinHost()) {}

  bool generatesCode() const override { return false; }
  std::string_view language() const override { return "none"; }
  lower::KernelProgram lowerShapes(const ir::Graph&, const fusion::Kernel&,
                                   const std::vector<std::vector<int64_t>>&) const override {
    refuse();
  }
  const fusion::Scheduler* scheduler() const override { return nullptr; }
  void schedule(lower::KernelProgram&) const override { refuse(); }
  std::vector<rt::KernelCode> emit(const lower::KernelProgram&) const override { refuse(); }
  CompileReport compile(const rt::KernelArtifact&) const override { refuse(); }

 private:
  [[noreturn]] static void refuse() {
    throwError(ErrorCode::Internal, "the reference backend runs graphs, not generated code");
  }
};

}  // namespace

namespace registration {

// Listed in src/target/CMakeLists.txt's built-in targets.
void reference() {
  TargetInfo info;
  info.backend = "reference";
  // Planned only through its engine: `stitch plan --target host` is the cpu target's name.
  info.named = [](std::string_view) -> std::optional<rt::Target> { return std::nullopt; };
  info.offline = [](rt::Target&, std::string*) {};
  info.make = [](const rt::Target& t) { return std::make_unique<ReferenceTarget>(t); };
  registerTarget(std::move(info));
}

}  // namespace registration

}  // namespace stitch::target
