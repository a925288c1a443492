// Graphs and modules in the C API: building op by op, parsing, printing, inspecting.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "api/api_internal.h"
#include "ir/infer.h"
#include "ir/parser.h"
#include "ir/printer.h"

using namespace stitch;

namespace stitch::api {

ir::DType toDType(int64_t v) {
  STITCH_CHECK(v >= 0 && v < ir::kNumDTypes, ErrorCode::InvalidArgument,
               "{} is not a valid stitch_dtype_t", v);
  return static_cast<ir::DType>(v);
}

}  // namespace stitch::api

namespace {

ir::Shape toShape(const stitch_dim_t* dims, size_t rank) {
  STITCH_CHECK(rank == 0 || dims != nullptr, ErrorCode::InvalidArgument,
               "dims must not be NULL when rank is {}", rank);
  ir::Shape s;
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i].symbol == nullptr) {
      s.push_back(ir::Dim::of(dims[i].size));
      continue;
    }
    // Dim::sym("") would read as a static dim of size 0: a symbol must be a real identifier,
    // as in the text format, so that a graph prints and parses back the same.
    std::string_view sym = dims[i].symbol;
    STITCH_CHECK(
        ir::isIdentifier(sym) && !ir::isReservedWord(sym), ErrorCode::InvalidArgument,
        "dims[{}].symbol '{}' is not a valid symbol (an identifier [A-Za-z_][A-Za-z0-9_]*, "
        "not a reserved word); use symbol = NULL for a static dim",
        i, sym);
    s.push_back(ir::Dim::sym(std::string(sym)));
  }
  return s;
}

ir::AttrValue toAttrValue(const stitch_attr_t& a) {
  auto needList = [&] {
    STITCH_CHECK(
        a.count == 0 || (a.kind == STITCH_ATTR_INTS ? a.ints != nullptr : a.dims != nullptr),
        ErrorCode::InvalidArgument, "attribute '{}': list pointer is NULL", a.name);
  };
  const int64_t kind = api::enumValue(a.kind);
  switch (kind) {
    case STITCH_ATTR_INT: return a.i;
    case STITCH_ATTR_FLOAT: return a.f;
    case STITCH_ATTR_BOOL: return a.i != 0;
    case STITCH_ATTR_INTS: needList(); return std::vector<int64_t>(a.ints, a.ints + a.count);
    case STITCH_ATTR_DIMS: needList(); return toShape(a.dims, a.count);
    case STITCH_ATTR_DTYPE: return api::toDType(a.i);
    case STITCH_ATTR_IDENT:
      STITCH_CHECK(a.s != nullptr, ErrorCode::InvalidArgument, "attribute '{}': s is NULL", a.name);
      return std::string(a.s);
  }
  throwError(ErrorCode::InvalidArgument,
             fmt::format("attribute '{}' has an invalid kind {}", a.name, kind));
}

ir::Graph parseOne(const char* text, const char* filename) {
  std::vector<ir::Graph> gs = ir::parseModule(text, filename ? filename : "<input>");
  STITCH_CHECK(gs.size() == 1, ErrorCode::Parse,
               "{}: expected exactly one graph, found {} (use stitch_module_parse)",
               filename ? filename : "<input>", gs.size());
  return std::move(gs[0]);
}

stitch_module_t makeModule(std::vector<ir::Graph> gs) {
  auto m = std::make_unique<stitch_module_s>();
  for (ir::Graph& g : gs)
    m->graphs.push_back(std::make_unique<stitch_graph_s>(ir::GraphBuilder(std::move(g)), true));
  for (auto& g : m->graphs) api::publish(g.get());
  return api::publish(m.release());
}

}  // namespace

extern "C" {

stitch_status_t stitch_graph_create(const char* name, stitch_graph_t* out) {
  STITCH_API_REQUIRE(name);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    *out = api::publish(new stitch_graph_s(ir::GraphBuilder(name)));
    return STITCH_OK;
  })
}

void stitch_graph_destroy(stitch_graph_t graph) {
  // A module's graph stays registered (and alive) until its module is destroyed.
  if (api::isLive(graph) && graph->borrowed) return;
  if (api::destroyCheck(graph, api::HandleKind::Graph, __func__)) delete graph;
}

stitch_status_t stitch_graph_add_input(stitch_graph_t graph, const char* name, stitch_dtype_t dtype,
                                       const stitch_dim_t* dims, size_t rank, stitch_value_t* out) {
  STITCH_API_HANDLE(graph);
  STITCH_API_REQUIRE(name);
  STITCH_API_GUARD({
    int id =
        graph->builder.addInput(name, ir::TensorType{api::toDType(dtype), toShape(dims, rank)});
    if (out) *out = id;
    return STITCH_OK;
  })
}

stitch_status_t stitch_graph_add_constant(stitch_graph_t graph, double value, stitch_dtype_t dtype,
                                          stitch_value_t* out) {
  STITCH_API_HANDLE(graph);
  STITCH_API_GUARD({
    int id = graph->builder.addConstant(value, api::toDType(dtype));
    if (out) *out = id;
    return STITCH_OK;
  })
}

stitch_status_t stitch_graph_add_op(stitch_graph_t graph, const char* op,
                                    const stitch_value_t* operands, size_t num_operands,
                                    const stitch_attr_t* attrs, size_t num_attrs, const char* name,
                                    stitch_value_t* out) {
  STITCH_API_HANDLE(graph);
  STITCH_API_REQUIRE(op);
  if (num_operands) STITCH_API_REQUIRE(operands);
  if (num_attrs) STITCH_API_REQUIRE(attrs);
  STITCH_API_GUARD({
    auto code = ir::findOp(op);
    STITCH_CHECK(code.has_value(), ErrorCode::InvalidGraph, "unknown op '{}'", op);
    ir::Attrs as;
    for (size_t i = 0; i < num_attrs; ++i) {
      STITCH_CHECK(attrs[i].name != nullptr, ErrorCode::InvalidArgument, "attrs[{}].name is NULL",
                   i);
      STITCH_CHECK(!as.has(attrs[i].name), ErrorCode::InvalidGraph, "attribute '{}' is given twice",
                   attrs[i].name);
      as.set(attrs[i].name, toAttrValue(attrs[i]));
    }
    try {
      int id = graph->builder.addOp(*code, std::vector<int>(operands, operands + num_operands),
                                    std::move(as), name ? name : "");
      if (out) *out = id;
    } catch (const ir::OpError& e) {
      // Name the op (and operand) in the message: the C caller has no source location.
      std::string where = e.operand() >= 0   ? fmt::format(" operand {}", e.operand())
                          : e.attr().empty() ? std::string()
                                             : fmt::format(" attribute '{}'", e.attr());
      throwError(ErrorCode::InvalidGraph, fmt::format("{}{}: {}", op, where, e.message()));
    }
    return STITCH_OK;
  })
}

stitch_status_t stitch_graph_set_outputs(stitch_graph_t graph, const stitch_value_t* values,
                                         size_t count) {
  STITCH_API_HANDLE(graph);
  if (count) STITCH_API_REQUIRE(values);
  STITCH_API_GUARD({
    graph->builder.setOutputs(std::vector<int>(values, values + count));
    return STITCH_OK;
  })
}

stitch_status_t stitch_graph_verify(stitch_graph_t graph) {
  STITCH_API_HANDLE(graph);
  STITCH_API_GUARD({
    ir::verify(graph->graph());
    return STITCH_OK;
  })
}

stitch_status_t stitch_graph_parse(const char* text, const char* filename, stitch_graph_t* out) {
  STITCH_API_REQUIRE(text);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    *out = api::publish(new stitch_graph_s(ir::GraphBuilder(parseOne(text, filename))));
    return STITCH_OK;
  })
}

stitch_status_t stitch_graph_print(stitch_graph_t graph, char* buf, size_t capacity,
                                   size_t* needed) {
  STITCH_API_HANDLE(graph);
  if (capacity) STITCH_API_REQUIRE(buf);
  STITCH_API_GUARD({
    api::copyOut(ir::printGraph(graph->graph()), buf, capacity, needed);
    return STITCH_OK;
  })
}

const char* stitch_graph_name(stitch_graph_t graph) {
  return api::isLive(graph) ? graph->graph().name().c_str() : nullptr;
}

size_t stitch_graph_num_inputs(stitch_graph_t graph) {
  return api::isLive(graph) ? graph->graph().inputs().size() : 0;
}

size_t stitch_graph_num_outputs(stitch_graph_t graph) {
  return api::isLive(graph) ? graph->graph().outputs().size() : 0;
}

size_t stitch_graph_num_ops(stitch_graph_t graph) {
  return api::isLive(graph) ? graph->graph().numOps() : 0;
}

stitch_status_t stitch_graph_value_info(stitch_graph_t graph, int is_output, size_t index,
                                        const char** name, stitch_dtype_t* dtype, size_t* rank,
                                        stitch_dim_t* dims, size_t max_dims) {
  STITCH_API_HANDLE(graph);
  STITCH_API_GUARD({
    const ir::Graph& g = graph->graph();
    auto list = is_output ? g.outputs() : g.inputs();
    STITCH_CHECK(index < list.size(), ErrorCode::InvalidArgument,
                 "{} index {} is out of range (graph {} has {})", is_output ? "output" : "input",
                 index, g.name(), list.size());
    const ir::Node& n = g.node(list[index]);
    if (name) *name = n.name.c_str();
    if (dtype) *dtype = static_cast<stitch_dtype_t>(n.type.dtype);
    if (rank) *rank = n.type.shape.size();
    if (dims)
      for (size_t i = 0; i < n.type.shape.size() && i < max_dims; ++i) {
        const ir::Dim& d = n.type.shape[i];
        dims[i].size = d.size;
        dims[i].symbol = d.isSymbolic() ? d.symbol.c_str() : nullptr;
      }
    return STITCH_OK;
  })
}

stitch_status_t stitch_module_parse(const char* text, const char* filename, stitch_module_t* out) {
  STITCH_API_REQUIRE(text);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    *out = makeModule(ir::parseModule(text, filename ? filename : "<input>"));
    return STITCH_OK;
  })
}

stitch_status_t stitch_module_parse_file(const char* path, stitch_module_t* out) {
  STITCH_API_REQUIRE(path);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    std::ifstream f(path, std::ios::binary);
    STITCH_CHECK(f.good(), ErrorCode::IO, "cannot open '{}': {}", path, std::strerror(errno));
    std::stringstream ss;
    ss << f.rdbuf();
    STITCH_CHECK(!f.bad(), ErrorCode::IO, "cannot read '{}'", path);
    *out = makeModule(ir::parseModule(ss.str(), path));
    return STITCH_OK;
  })
}

void stitch_module_destroy(stitch_module_t module) {
  if (api::destroyCheck(module, api::HandleKind::Module, __func__)) delete module;
}

size_t stitch_module_num_graphs(stitch_module_t module) {
  return api::isLive(module) ? module->graphs.size() : 0;
}

stitch_graph_t stitch_module_graph(stitch_module_t module, size_t index) {
  if (!api::isLive(module) || index >= module->graphs.size()) return nullptr;
  return module->graphs[index].get();
}

stitch_graph_t stitch_module_find_graph(stitch_module_t module, const char* name) {
  if (!api::isLive(module) || !name) return nullptr;
  for (auto& g : module->graphs)
    if (g->graph().name() == name) return g.get();
  return nullptr;
}

}  // extern "C"
