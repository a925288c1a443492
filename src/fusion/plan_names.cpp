// Names of the plan's enums, as STITCH_FUSION, `stitch plan` and the explain formats spell them.
#include "fusion/plan.h"
#include "runtime/support/error.h"

namespace stitch::fusion {

namespace {

[[noreturn]] void badEnum(const char* what, int value) {
  throwError(ErrorCode::Internal, fmt::format("internal error: {} has no value {}", what, value));
}

}  // namespace

std::string_view modeName(Mode m) {
  switch (m) {
    case Mode::Stitch: return "stitch";
    case Mode::Basic: return "basic";
    case Mode::Off: return "off";
  }
  badEnum("Mode", static_cast<int>(m));
}

std::string_view schemeName(Scheme s) {
  switch (s) {
    case Scheme::Local: return "local";
    case Scheme::Warp: return "warp";
    case Scheme::Block: return "block";
    case Scheme::Global: return "global";
  }
  badEnum("Scheme", static_cast<int>(s));
}

std::string_view cutVerdictName(CutVerdict v) {
  switch (v) {
    case CutVerdict::Off: return "off";
    case CutVerdict::Invalid: return "invalid";
    case CutVerdict::Cycle: return "cycle";
    case CutVerdict::DoesNotPay: return "does_not_pay";
    case CutVerdict::KeptApart: return "kept_apart";
  }
  badEnum("CutVerdict", static_cast<int>(v));
}

std::string_view mappingKindName(MappingKind k) {
  switch (k) {
    case MappingKind::Loop: return "loop";
    case MappingKind::RowReduce: return "row_reduce";
    case MappingKind::ColumnReduce: return "column_reduce";
    case MappingKind::MiddleReduce: return "middle_reduce";
    case MappingKind::AllReduce: return "all_reduce";
  }
  badEnum("MappingKind", static_cast<int>(k));
}

std::string_view rowWidthName(RowWidth w) {
  switch (w) {
    case RowWidth::Thread: return "thread";
    case RowWidth::Warp: return "warp";
    case RowWidth::Block: return "block";
    case RowWidth::MultiBlock: return "multi_block";
  }
  badEnum("RowWidth", static_cast<int>(w));
}

}  // namespace stitch::fusion
