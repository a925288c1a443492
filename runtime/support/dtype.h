// Element types of the graph IR and their exact rounding rules.
//
// The reference interpreter computes in f64 (and i64) and rounds each result to its dtype with
// roundToDType, so every backend is judged against one precisely defined answer. f16 and bf16 use
// round-to-nearest-even straight from f64 (not via f32, which would round twice).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace stitch::ir {

// Values match stitch_dtype_t.
enum class DType : uint8_t { F16 = 0, BF16 = 1, F32 = 2, F64 = 3, I32 = 4, I64 = 5, Bool = 6 };
inline constexpr int kNumDTypes = 7;

std::string_view dtypeName(DType t);
std::optional<DType> parseDType(std::string_view name);
int dtypeBytes(DType t);
inline bool isFloat(DType t) { return t <= DType::F64; }
inline bool isInt(DType t) { return t == DType::I32 || t == DType::I64; }
inline bool isBool(DType t) { return t == DType::Bool; }

// Rounds x to the nearest value of float dtype t (ties to even; overflow to +-inf; NaN stays NaN).
double roundToFloat(double x, DType t);

// f16 / bf16 bit patterns. The *Bits functions expect a value already representable in the
// format (e.g. from roundToFloat) and are exact for those.
uint16_t f16Bits(double representable);
double f16Value(uint16_t bits);
uint16_t bf16Bits(double representable);
double bf16Value(uint16_t bits);

// Integer conversion rules shared by every backend: wraps to 32 bits two's complement for i32.
inline int64_t wrapToI32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

// Float -> integer conversion: truncates toward zero, saturates at the type's limits, NaN -> 0.
int64_t floatToInt(double x, DType t);

}  // namespace stitch::ir
