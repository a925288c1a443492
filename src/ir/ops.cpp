#include "ir/ops.h"

#include <array>
#include <unordered_map>

#include "ir/infer.h"

namespace stitch::ir {

namespace {

constexpr std::array<std::string_view, 2> kGeluChoices = {"none", "tanh"};

// Attribute schemas, referenced by name from ops.def.
constexpr std::span<const AttrSpec> kAttrs_None = {};
constexpr AttrSpec kAttrs_Constant[] = {{"value", AttrKind::Float, true},
                                        {"dtype", AttrKind::DType, true}};
constexpr AttrSpec kAttrs_Cast[] = {{"to", AttrKind::DType, true}};
constexpr AttrSpec kAttrs_Reduce[] = {{"axes", AttrKind::Ints, false},
                                      {"keepdims", AttrKind::Bool, false}};
constexpr AttrSpec kAttrs_Shape[] = {{"shape", AttrKind::Dims, true}};
constexpr AttrSpec kAttrs_Transpose[] = {{"perm", AttrKind::Ints, true}};
constexpr AttrSpec kAttrs_Slice[] = {{"starts", AttrKind::Ints, true},
                                     {"ends", AttrKind::Ints, true},
                                     {"steps", AttrKind::Ints, false}};
constexpr AttrSpec kAttrs_Concat[] = {{"axis", AttrKind::Int, true}};
constexpr AttrSpec kAttrs_Full[] = {{"shape", AttrKind::Dims, true},
                                    {"value", AttrKind::Float, true},
                                    {"dtype", AttrKind::DType, true}};
constexpr AttrSpec kAttrs_Iota[] = {{"shape", AttrKind::Dims, true},
                                    {"axis", AttrKind::Int, true},
                                    {"dtype", AttrKind::DType, true}};
constexpr AttrSpec kAttrs_Random[] = {{"shape", AttrKind::Dims, true},
                                      {"dtype", AttrKind::DType, false}};
constexpr AttrSpec kAttrs_Gather[] = {{"axis", AttrKind::Int, true}};
constexpr AttrSpec kAttrs_CheckIndex[] = {{"size", AttrKind::Dims, true}};
constexpr AttrSpec kAttrs_ArgReduce[] = {{"axis", AttrKind::Int, true},
                                         {"keepdims", AttrKind::Bool, false}};
constexpr AttrSpec kAttrs_Axis[] = {{"axis", AttrKind::Int, false}};
constexpr AttrSpec kAttrs_LayerNorm[] = {{"axis", AttrKind::Int, false},
                                         {"eps", AttrKind::Float, false}};
constexpr AttrSpec kAttrs_RmsNorm[] = {{"axis", AttrKind::Int, false},
                                       {"eps", AttrKind::Float, false}};
constexpr AttrSpec kAttrs_Gelu[] = {{"approximate", AttrKind::Ident, false, kGeluChoices}};

const OpInfo kOps[] = {
#define STITCH_OP(Id, Name, Class, Arity, Attrs, Infer) \
  {OpCode::Id, Name, OpClass::Class, Arity, Attrs, Infer},
#include "ir/ops.def"
};

constexpr OpCode kAllOps[] = {
#define STITCH_OP(Id, Name, Class, Arity, Attrs, Infer) OpCode::Id,
#include "ir/ops.def"
};

}  // namespace

std::span<const OpCode> allOps() { return kAllOps; }

const OpInfo& opInfo(OpCode op) { return kOps[static_cast<size_t>(op)]; }

std::optional<OpCode> findOp(std::string_view name) {
  static const auto* byName = [] {
    auto* m = new std::unordered_map<std::string_view, OpCode>();
    for (const OpInfo& info : kOps)
      if (info.inText()) (*m)[info.name] = info.code;
    return m;
  }();
  auto it = byName->find(name);
  if (it == byName->end()) return std::nullopt;
  return it->second;
}

std::string typeStr(const TensorType& t) {
  return std::string(dtypeName(t.dtype)) + shapeStr(t.shape);
}

}  // namespace stitch::ir
