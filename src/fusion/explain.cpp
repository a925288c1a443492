// Explaining a plan in three formats (see explain.h).
//
// The plan carries the symbol sizes it was made for (Plan::bindings), so byte sizes of kernel
// inputs and outputs are exact. A plan made by hand without them (tests) shows a size it cannot
// know as unknown (text: the type alone; JSON: null), never guessed.
#include "fusion/explain.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch::fusion {

namespace {

// ---------------------------------------------------------------------------------------------
// Shared facts about a (graph, plan) pair.

// An edge's key in the lookup tables.
uint64_t edgeKey(int producer, int consumer) {
  return static_cast<uint64_t>(static_cast<uint32_t>(producer)) << 32 |
         static_cast<uint32_t>(consumer);
}

struct Facts {
  const ir::Graph& g;
  const Plan& p;
  std::vector<int> kernelOf;  // node id -> index of the first kernel holding it, or -1
  ir::Bindings bindings;      // the plan's: every symbol of the graph
  // Edges by (producer, consumer), so explaining stays linear in the size of the plan.
  std::unordered_map<uint64_t, const Edge*> edges;  // inside kernels
  std::unordered_map<uint64_t, const CutEdge*> cuts;

  const Edge* edge(int producer, int consumer) const {
    auto it = edges.find(edgeKey(producer, consumer));
    return it == edges.end() ? nullptr : it->second;
  }
  const CutEdge* cut(int producer, int consumer) const {
    auto it = cuts.find(edgeKey(producer, consumer));
    return it == cuts.end() ? nullptr : it->second;
  }
};

Facts gather(const ir::Graph& g, const Plan& p) {
  auto n = static_cast<int>(g.nodes().size());
  auto check = [&](int id, const char* what) {
    STITCH_INTERNAL(id >= 0 && id < n, "plan refers to {} {}, but graph {} has {} nodes", what, id,
                    g.name(), n);
  };
  for (const Kernel& k : p.kernels) {
    for (int id : k.nodes) check(id, "node");
    if (k.dominant >= 0) check(k.dominant, "dominant node");
    for (const Edge& e : k.edges) {
      check(e.producer, "producer");
      check(e.consumer, "consumer");
    }
    for (int id : k.inputs) check(id, "input");
    for (int id : k.outputs) check(id, "output");
  }
  for (const CutEdge& c : p.cuts) {
    check(c.producer, "producer");
    check(c.consumer, "consumer");
  }

  Facts f{g, p, std::vector<int>(static_cast<size_t>(n), -1), p.bindings, {}, {}};
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    for (int id : p.kernels[k].nodes)
      if (f.kernelOf[static_cast<size_t>(id)] < 0)
        f.kernelOf[static_cast<size_t>(id)] = static_cast<int>(k);
    for (const Edge& e : p.kernels[k].edges) f.edges.emplace(edgeKey(e.producer, e.consumer), &e);
  }
  for (const CutEdge& c : p.cuts) f.cuts.emplace(edgeKey(c.producer, c.consumer), &c);
  return f;
}

// A value as an operand is written: its name, or a constant's literal.
std::string operandText(const ir::Graph& g, int id) {
  const ir::Node& n = g.node(id);
  if (n.op != ir::OpCode::Constant) return n.name;
  double v = n.attrs.getFloat("value");
  return ir::isInt(n.type.dtype) ? std::to_string(static_cast<int64_t>(v)) : ir::formatDouble(v);
}

// Bindings deduced from a plan are trusted for display only: a size past the limit shows as
// unknown rather than wrapping.
std::optional<int64_t> valueBytes(const Facts& f, int id) {
  const ir::TensorType& t = f.g.node(id).type;
  std::vector<int64_t> dims;
  for (const ir::Dim& d : t.shape) {
    if (d.isStatic()) {
      dims.push_back(d.size);
    } else if (auto it = f.bindings.find(d.symbol); it != f.bindings.end()) {
      dims.push_back(it->second);
    } else {
      return std::nullopt;
    }
  }
  auto size = checkedTensorSize(dims, ir::dtypeBytes(t.dtype));
  if (!size) return std::nullopt;
  return size->bytes;
}

// Operands of a node, each value once, constants left out.
std::vector<int> distinctValueOperands(const ir::Node& n, const ir::Graph& g) {
  std::vector<int> out;
  for (int o : n.operands)
    if (g.node(o).op != ir::OpCode::Constant && std::find(out.begin(), out.end(), o) == out.end())
      out.push_back(o);
  return out;
}

int64_t kernelBytes(const Kernel& k) {
  return saturatingAdd(k.summary.bytesRead, k.summary.bytesWritten);
}

double toMicros(double seconds) { return seconds * 1e6; }

// ---------------------------------------------------------------------------------------------
// Number formatting for people.

// Decimal units, like bandwidths (TB/s) are quoted.
std::string humanBytes(int64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (std::fabs(v) >= 1000 && u + 1 < std::size(kUnits)) v /= 1000, ++u;
  if (u == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.{}f} {}", v, std::fabs(v) < 100 ? 1 : 0, kUnits[u]);
}

// Microseconds with about three significant digits.
std::string humanMicros(double us) {
  if (std::isnan(us)) return "nan";
  if (std::isinf(us)) return us > 0 ? "inf" : "-inf";
  int decimals = std::fabs(us) < 10 ? 2 : std::fabs(us) < 1000 ? 1 : 0;
  return fmt::format("{:.{}f}", us, decimals);
}

std::string speedup(const Plan& p) {
  if (!(p.time > 0) || !std::isfinite(p.time) || !std::isfinite(p.unfusedTime)) return "n/a";
  return fmt::format("{:.1f}x", p.unfusedTime / p.time);
}

std::string widthPhrase(RowWidth w) {
  std::string s(rowWidthName(w));
  std::replace(s.begin(), s.end(), '_', '-');
  return s + "-per-row";
}

// "row_reduce warp-per-row, rows 4096 x length 768, 4096 blocks x 32 threads".
std::string mappingPhrase(const Mapping& m) {
  std::string s(mappingKindName(m.kind));
  switch (m.kind) {
    case MappingKind::Loop: s += fmt::format(", {} elements", m.domain); break;
    case MappingKind::RowReduce:
      s += fmt::format(" {}, rows {} x length {}", widthPhrase(m.width), m.rows, m.rowLength);
      break;
    case MappingKind::ColumnReduce:
    case MappingKind::MiddleReduce:
      s += fmt::format(", rows {} x length {}", m.rows, m.rowLength);
      break;
    case MappingKind::AllReduce: s += fmt::format(", length {}", m.rowLength); break;
  }
  return s + fmt::format(", {} blocks x {} threads", m.blocks, m.threadsPerBlock);
}

std::string bindingsPhrase(const ir::Bindings& b) {
  std::string s;
  for (const auto& [sym, size] : b) s += fmt::format("{}{}={}", s.empty() ? "" : ", ", sym, size);
  return s;
}

// "x f32[N, 768] 12.6 MB, gamma f32[768] 3.1 KB".
std::string valueList(const Facts& f, const std::vector<int>& ids) {
  if (ids.empty()) return "none";
  std::string s;
  for (int id : ids) {
    if (!s.empty()) s += ", ";
    s += operandText(f.g, id) + " " + ir::typeStr(f.g.node(id).type);
    if (auto b = valueBytes(f, id)) s += " " + humanBytes(*b);
  }
  return s;
}

std::string opCall(const ir::Graph& g, const ir::Node& n) {
  std::string s = std::string(ir::opName(n.op)) + "(";
  bool first = true;
  for (int o : n.operands) {
    s += (first ? "" : ", ") + operandText(g, o);
    first = false;
  }
  for (const ir::Attr& a : n.attrs.list()) {
    s += (first ? "" : ", ") + a.name + "=" + ir::attrValueStr(a.value);
    first = false;
  }
  return s + ")";
}

// One line of text: control characters (a reason's newline or tab) become spaces.
std::string oneLine(std::string s) {
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
  return s;
}

std::string padRight(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// ---------------------------------------------------------------------------------------------
// A small JSON writer: indented containers, or compact ones for short lists.

class JsonWriter {
 public:
  JsonWriter& beginObject(bool compact = false) { return open('{', compact); }
  JsonWriter& endObject() { return close('}'); }
  JsonWriter& beginArray(bool compact = false) { return open('[', compact); }
  JsonWriter& endArray() { return close(']'); }
  JsonWriter& key(std::string_view k) {
    separate();
    appendQuoted(k);
    out_ += ": ";
    afterKey_ = true;
    return *this;
  }
  JsonWriter& string(std::string_view s) {
    separate();
    appendQuoted(s);
    return *this;
  }
  JsonWriter& integer(int64_t v) {
    separate();
    out_ += std::to_string(v);
    return *this;
  }
  // JSON has no infinity or NaN: they are written as null.
  JsonWriter& number(double v) {
    separate();
    out_ += std::isfinite(v) ? fmt::format("{}", v) : "null";
    return *this;
  }
  JsonWriter& boolean(bool v) {
    separate();
    out_ += v ? "true" : "false";
    return *this;
  }
  JsonWriter& null() {
    separate();
    out_ += "null";
    return *this;
  }
  std::string finish() && {
    STITCH_INTERNAL(stack_.empty(), "JSON writer finished with {} open containers", stack_.size());
    return std::move(out_) + "\n";
  }

 private:
  struct Level {
    char close;
    bool compact;
    bool empty = true;
  };

  JsonWriter& open(char c, bool compact) {
    separate();
    out_ += c;
    stack_.push_back({c == '{' ? '}' : ']', compact || (!stack_.empty() && stack_.back().compact)});
    return *this;
  }
  JsonWriter& close(char c) {
    STITCH_INTERNAL(!stack_.empty() && stack_.back().close == c, "unbalanced JSON writer");
    Level l = stack_.back();
    stack_.pop_back();
    if (!l.empty && !l.compact) newline();
    out_ += c;
    return *this;
  }
  void separate() {
    if (afterKey_) {
      afterKey_ = false;
      return;
    }
    if (stack_.empty()) return;
    Level& l = stack_.back();
    if (!l.empty) out_ += l.compact ? ", " : ",";
    l.empty = false;
    if (!l.compact) newline();
  }
  void newline() {
    out_ += '\n';
    out_.append(2 * stack_.size(), ' ');
  }
  void appendQuoted(std::string_view s) {
    out_ += '"';
    for (char ch : s) {
      switch (ch) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        case '\b': out_ += "\\b"; break;
        case '\f': out_ += "\\f"; break;
        default:
          if (static_cast<unsigned char>(ch) < 0x20)
            out_ += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(ch)));
          else out_ += ch;  // UTF-8 passes through
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<Level> stack_;
  bool afterKey_ = false;
};

// A DOT double-quoted string's contents: quotes and backslashes escaped, newlines as \n.
std::string dotEscape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out;
}

std::string dotId(int id) { return "n" + std::to_string(id); }

}  // namespace

// -----------------------------------------------------------------------------------------------

std::string explainText(const ir::Graph& g, const Plan& p) {
  Facts f = gather(g, p);
  std::string out = "plan " + g.name();
  if (!f.bindings.empty()) out += " (" + bindingsPhrase(f.bindings) + ")";
  out += fmt::format(": mode {}, target {}, {} kernel{}", modeName(p.mode), p.target,
                     p.kernels.size(), p.kernels.size() == 1 ? "" : "s");
  if (p.candidate > 0)
    out += fmt::format(" (candidate {} of the search: not the plan it picks)", p.candidate);
  out += "\n";

  for (size_t ki = 0; ki < p.kernels.size(); ++ki) {
    const Kernel& k = p.kernels[ki];
    std::string dominant = k.dominant >= 0 ? fmt::format("{} ({})", g.node(k.dominant).name,
                                                         ir::opName(g.node(k.dominant).op))
                                           : "none";
    out += fmt::format("\nkernel {}: {} op{}, dominant {}, mapping {}\n", ki, k.nodes.size(),
                       k.nodes.size() == 1 ? "" : "s", dominant, mappingPhrase(k.mapping));

    // Ops, aligned: "name = op(args)  [producer: scheme, ...]". Long calls do not push the
    // scheme column past a readable width.
    constexpr size_t kMaxCallWidth = 48;
    size_t nameWidth = 0, callWidth = 0;
    std::vector<std::string> calls;
    for (int id : k.nodes) {
      nameWidth = std::max(nameWidth, g.node(id).name.size());
      calls.push_back(opCall(g, g.node(id)));
      callWidth = std::max(callWidth, std::min(calls.back().size(), kMaxCallWidth));
    }
    for (size_t i = 0; i < k.nodes.size(); ++i) {
      int id = k.nodes[i];
      std::string schemes;
      for (int o : distinctValueOperands(g.node(id), g)) {
        const Edge* e = f.edge(o, id);
        if (e == nullptr) continue;
        schemes += fmt::format("{}{}: {}{}", schemes.empty() ? "" : "; ", g.node(o).name,
                               schemeName(e->scheme), e->recompute ? ", recompute" : "");
      }
      std::string line = "  " + padRight(g.node(id).name, nameWidth) + " = " + calls[i];
      if (!schemes.empty())
        line = padRight(std::move(line), nameWidth + 5 + callWidth) + "  [" + schemes + "]";
      out += line + "\n";
    }
    out += "  in:   " + valueList(f, k.inputs) + "\n";
    out += "  out:  " + valueList(f, k.outputs) + "\n";
    const KernelCost& c = k.cost;
    out += fmt::format(
        "  cost: {}, {} µs (launch {}, memory {}, compute {}, sync {} µs; efficiency {:.2f})\n",
        humanBytes(kernelBytes(k)), humanMicros(toMicros(c.time)), humanMicros(toMicros(c.launch)),
        humanMicros(toMicros(c.memory)), humanMicros(toMicros(c.compute)),
        humanMicros(toMicros(c.sync)), c.efficiency);
    if (!c.feasible) out += "  INFEASIBLE: " + oneLine(c.infeasibleReason) + "\n";
  }

  std::vector<std::string> unplaced;
  for (const ir::Node& n : g.nodes()) {
    auto id = static_cast<size_t>(&n - g.nodes().data());
    if (n.op != ir::OpCode::Input && n.op != ir::OpCode::Constant && f.kernelOf[id] < 0)
      unplaced.push_back(n.name);
  }
  if (!unplaced.empty()) {
    out += "\nnot in any kernel:";
    for (const std::string& name : unplaced) out += " " + name;
    out += "\n";
  }

  out +=
      fmt::format("\ntotals: {} kernel{}, {}, {} µs; unfused: {} kernel{}, {}, {} µs ({})\n",
                  p.kernels.size(), p.kernels.size() == 1 ? "" : "s", humanBytes(p.bytes),
                  humanMicros(toMicros(p.time)), p.unfusedKernels, p.unfusedKernels == 1 ? "" : "s",
                  humanBytes(p.unfusedBytes), humanMicros(toMicros(p.unfusedTime)), speedup(p));
  if (p.cuts.empty()) return out + "cut edges: none\n";
  out += "cut edges:\n";
  size_t width = 0;
  std::vector<std::string> heads;
  for (const CutEdge& c : p.cuts) {
    heads.push_back(g.node(c.producer).name + " -> " + g.node(c.consumer).name + ":");
    width = std::max(width, heads.back().size());
  }
  for (size_t i = 0; i < p.cuts.size(); ++i)
    out += "  " + padRight(heads[i], width) + " " + oneLine(p.cuts[i].reason) + "\n";
  return out;
}

std::string explainDot(const ir::Graph& g, const Plan& p) {
  Facts f = gather(g, p);
  std::string out = "digraph \"" + dotEscape(g.name()) + "\" {\n";
  out += "  label=\"" +
         dotEscape(fmt::format("{}: mode {}, target {}, {} kernels, {} µs (unfused {} µs, {})",
                               g.name(), modeName(p.mode), p.target, p.kernels.size(),
                               humanMicros(toMicros(p.time)), humanMicros(toMicros(p.unfusedTime)),
                               speedup(p))) +
         "\";\n  labelloc=t;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n"
         "  edge [fontname=\"Helvetica\", fontsize=10];\n";

  std::vector<bool> isOutput(g.nodes().size(), false);
  for (int o : g.outputs()) isOutput[static_cast<size_t>(o)] = true;
  auto nodeLine = [&](int id, std::string_view indent) {
    const ir::Node& n = g.node(id);
    std::string label = dotEscape(n.name) + "\\n" + dotEscape(ir::opName(n.op));
    return fmt::format("{}{} [label=\"{}\"{}];\n", indent, dotId(id), label,
                       isOutput[static_cast<size_t>(id)] ? ", peripheries=2" : "");
  };

  for (int id : g.inputs())
    out += fmt::format("  {} [shape=plain, label=\"{}\\n{}\"];\n", dotId(id),
                       dotEscape(g.node(id).name), dotEscape(ir::typeStr(g.node(id).type)));

  for (size_t ki = 0; ki < p.kernels.size(); ++ki) {
    const Kernel& k = p.kernels[ki];
    out += fmt::format("  subgraph cluster_{} {{\n", ki);
    std::string mapping = mappingPhrase(k.mapping);
    mapping.resize(std::min(mapping.size(), mapping.find(',')));  // kind and row width only
    out += "    label=\"" +
           dotEscape(fmt::format("kernel {}: {}\n{} µs", ki, mapping,
                                 humanMicros(toMicros(k.cost.time)))) +
           "\";\n    style=rounded;\n";
    for (int id : k.nodes)
      if (f.kernelOf[static_cast<size_t>(id)] == static_cast<int>(ki)) out += nodeLine(id, "    ");
    out += "  }\n";
  }
  // Ops the plan left out of every kernel (it should not), drawn so nothing is hidden.
  for (const ir::Node& n : g.nodes()) {
    auto id = static_cast<int>(&n - g.nodes().data());
    if (n.op != ir::OpCode::Input && n.op != ir::OpCode::Constant &&
        f.kernelOf[static_cast<size_t>(id)] < 0)
      out += nodeLine(id, "  ");
  }

  for (const ir::Node& n : g.nodes()) {
    auto c = static_cast<int>(&n - g.nodes().data());
    if (n.op == ir::OpCode::Input || n.op == ir::OpCode::Constant) continue;
    int kc = f.kernelOf[static_cast<size_t>(c)];
    for (int o : distinctValueOperands(n, g)) {
      int ko = f.kernelOf[static_cast<size_t>(o)];
      std::string attrs;
      if (g.node(o).op == ir::OpCode::Input) {
        attrs = "color=gray40";
      } else if (ko >= 0 && ko == kc) {
        const Edge* e = f.edge(o, c);
        if (e != nullptr)
          attrs = fmt::format("label=\"{}{}\"{}", schemeName(e->scheme),
                              e->recompute ? ", recompute" : "",
                              e->scheme == Scheme::Global ? ", color=red" : "");
      } else {
        attrs = "style=dashed, label=\"global memory\"";
        if (const CutEdge* cut = f.cut(o, c))
          attrs += ", tooltip=\"" + dotEscape(cut->reason) + "\"";
      }
      out += fmt::format("  {} -> {}{}{}{};\n", dotId(o), dotId(c), attrs.empty() ? "" : " [",
                         attrs, attrs.empty() ? "" : "]");
    }
  }
  return out + "}\n";
}

std::string explainJson(const ir::Graph& g, const Plan& p) {
  Facts f = gather(g, p);
  JsonWriter w;
  w.beginObject();
  w.key("graph").string(g.name());
  w.key("mode").string(modeName(p.mode));
  w.key("candidate").integer(p.candidate);
  w.key("target").string(p.target);
  w.key("bindings").beginObject(true);
  for (const auto& [sym, size] : f.bindings) w.key(sym).integer(size);
  w.endObject();

  auto values = [&](const std::vector<int>& ids) {
    w.beginArray();
    for (int id : ids) {
      w.beginObject(true).key("name").string(operandText(g, id));
      w.key("type").string(ir::typeStr(g.node(id).type));
      w.key("bytes");
      if (auto b = valueBytes(f, id)) w.integer(*b);
      else w.null();
      w.endObject();
    }
    w.endArray();
  };

  w.key("kernels").beginArray();
  for (const Kernel& k : p.kernels) {
    w.beginObject();
    w.key("ops").beginArray(true);
    for (int id : k.nodes) w.string(g.node(id).name);
    w.endArray();
    w.key("op_kinds").beginArray(true);
    for (int id : k.nodes) w.string(ir::opName(g.node(id).op));
    w.endArray();
    w.key("dominant");
    if (k.dominant >= 0) w.string(g.node(k.dominant).name);
    else w.null();
    const Mapping& m = k.mapping;
    w.key("mapping").beginObject(true);
    w.key("kind").string(mappingKindName(m.kind));
    w.key("width").string(rowWidthName(m.width));
    w.key("domain").integer(m.domain);
    w.key("rows").integer(m.rows);
    w.key("row_length").integer(m.rowLength);
    w.key("blocks").integer(m.blocks);
    w.key("threads_per_block").integer(m.threadsPerBlock);
    w.endObject();
    w.key("edges").beginArray();
    for (const Edge& e : k.edges) {
      w.beginObject(true);
      w.key("from").string(g.node(e.producer).name);
      w.key("to").string(g.node(e.consumer).name);
      w.key("scheme").string(schemeName(e.scheme));
      w.key("recompute").boolean(e.recompute);
      w.endObject();
    }
    w.endArray();
    w.key("inputs");
    values(k.inputs);
    w.key("outputs");
    values(k.outputs);
    w.key("bytes").integer(kernelBytes(k));
    w.key("time_us").number(toMicros(k.cost.time));
    const KernelCost& c = k.cost;
    w.key("cost").beginObject(true);
    w.key("launch_us").number(toMicros(c.launch));
    w.key("memory_us").number(toMicros(c.memory));
    w.key("compute_us").number(toMicros(c.compute));
    w.key("sync_us").number(toMicros(c.sync));
    w.key("efficiency").number(c.efficiency);
    w.key("feasible").boolean(c.feasible);
    if (!c.feasible) w.key("infeasible_reason").string(c.infeasibleReason);
    w.endObject();
    const KernelSummary& s = k.summary;
    w.key("summary").beginObject(true);
    w.key("bytes_read").integer(s.bytesRead);
    w.key("bytes_written").integer(s.bytesWritten);
    w.key("cheap_ops").integer(s.cheapOps);
    w.key("expensive_ops").integer(s.expensiveOps);
    w.key("recompute_cheap_ops").integer(s.recomputeCheapOps);
    w.key("recompute_expensive_ops").integer(s.recomputeExpensiveOps);
    w.key("shared_memory_per_block").integer(s.sharedMemoryPerBlock);
    w.key("registers_per_thread").integer(s.registersPerThread);
    w.key("bytes_in_flight_per_thread").integer(s.bytesInFlightPerThread);
    w.key("block_syncs").integer(s.blockSyncs);
    w.key("grid_syncs").integer(s.gridSyncs);
    w.endObject();
    w.endObject();
  }
  w.endArray();

  w.key("cuts").beginArray();
  for (const CutEdge& c : p.cuts) {
    w.beginObject(true);
    w.key("from").string(g.node(c.producer).name);
    w.key("to").string(g.node(c.consumer).name);
    w.key("reason").string(c.reason);
    w.endObject();
  }
  w.endArray();
  w.key("totals").beginObject(true);
  w.key("kernels").integer(static_cast<int64_t>(p.kernels.size()));
  w.key("bytes").integer(p.bytes);
  w.key("time_us").number(toMicros(p.time));
  w.endObject();
  w.key("unfused").beginObject(true);
  w.key("kernels").integer(p.unfusedKernels);
  w.key("bytes").integer(p.unfusedBytes);
  w.key("time_us").number(toMicros(p.unfusedTime));
  w.endObject();
  w.endObject();
  return std::move(w).finish();
}

}  // namespace stitch::fusion
