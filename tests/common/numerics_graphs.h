// Graphs that check the numerics of reductions (issue 11), shared by the cpu backend's tests
// (tests/api/test_numerics.cpp) and the GPU run tests (label gpu). Every graph builds its hard
// values in the graph, so inputs uniform in [-1, 1] (the test harnesses' inputs) exercise them:
//   - long f32 reductions of values near 1000, where an f32 running sum loses the addends, with
//     the result's large part subtracted so that an error in the sum is not hidden by the
//     relative tolerance;
//   - float products of rows with +-inf in them (reduce_prod over [-1, 1] values underflows);
//   - every reduction over empty extents (the reduced extent 0, the kept extent 0, both).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace stitch::numerics {

struct Case {
  std::string name;
  std::string text;                     // one graph
  std::map<std::string, int64_t> dims;  // bindings of its symbolic dims
};

// layer_norm over one row of L values near 1000 (the issue's reproducer: 10M and 16M).
inline Case layerNormNear1000(int64_t length) {
  return {"layer_norm of one row of " + std::to_string(length) + " values near 1000",
          R"(graph ln(x: f32[1, L], g: f32[L], b: f32[L]) {
  x1 = add(x, 1000.0)
  y = layer_norm(x1, g, b)
  return y
})",
          {{"L", length}}};
}

// Mean (minus 1000) and sum of rows near 1000: one row of `length` (split into sub-rows when
// `length` is even, one walk when odd), and the same as a column reduction over `length` rows.
inline Case longRowMean(int64_t rows, int64_t length) {
  return {"mean and sum of " + std::to_string(rows) + " rows of " + std::to_string(length),
          R"(graph m(x: f32[R, L]) {
  x1 = add(x, 1000.0)
  m = reduce_mean(x1, axes=[1])
  d = sub(m, 1000.0)
  s = reduce_sum(x1, axes=[1])
  return d, s
})",
          {{"R", rows}, {"L", length}}};
}

inline Case longColumnMean(int64_t rows, int64_t columns) {
  return {
      "column mean and sum over " + std::to_string(rows) + " rows of " + std::to_string(columns),
      R"(graph c(x: f32[R, C]) {
  x1 = add(x, 1000.0)
  m = reduce_mean(x1, axes=[0])
  d = sub(m, 1000.0)
  s = reduce_sum(x1, axes=[0])
  return d, s
})",
      {{"R", rows}, {"C", columns}}};
}

// reduce_prod of rows of [-1, 1] values (which underflow long before the end of the row) with
// +inf at column `at`, -inf at column 3 of row 1 as well, and a zero with the inf in row 2
// (NaN). dtype: f32, f64, f16 or bf16.
inline Case prodWithInf(const std::string& dtype, int64_t rows, int64_t length, int64_t at) {
  std::string t = dtype;
  return {"reduce_prod " + dtype + "[" + std::to_string(rows) + ", " + std::to_string(length) +
              "] with inf at " + std::to_string(at),
          "graph p(x: " + t +
              "[R, L]) {\n"
              "  col = iota(shape=[R, L], axis=1, dtype=i32)\n"
              "  row = iota(shape=[R, L], axis=0, dtype=i32)\n"
              "  zeros = full(shape=[R, L], value=0, dtype=" +
              t +
              ")\n"
              "  pinf = reciprocal(zeros)\n"
              "  minf = neg(pinf)\n"
              "  at = eq(col, " +
              std::to_string(at) +
              ")\n"
              "  y0 = select(at, pinf, x)\n"
              "  r1 = eq(row, 1)\n"
              "  c3 = eq(col, 3)\n"
              "  m1 = logical_and(r1, c3)\n"
              "  y1 = select(m1, minf, y0)\n"
              "  r2 = eq(row, 2)\n"
              "  c5 = eq(col, " +
              std::to_string(at == 5 ? 6 : 5) +
              ")\n"
              "  m2 = logical_and(r2, c5)\n"
              "  y = select(m2, zeros, y1)\n"
              "  p = reduce_prod(y, axes=[1])\n"
              "  return p\n"
              "}\n",
          {{"R", rows}, {"L", length}}};
}

// Every reduction of dtype `t` (mean only for floats) over axes `axes` of x: t[R, C].
inline Case emptyReductions(const std::string& t, const std::string& axes, int64_t rows,
                            int64_t columns, bool keepdims) {
  bool fl = t[0] == 'f' || t[0] == 'b';
  std::string kd = keepdims ? "true" : "false";
  std::string text = "graph e(x: " + t + "[R, C]) {\n";
  std::vector<std::string> outs;
  for (const char* op : {"sum", "max", "min", "prod", "mean"}) {
    if (!fl && std::string(op) == "mean") continue;
    text += "  " + std::string(op) + " = reduce_" + op + "(x, axes=" + axes + ", keepdims=" + kd +
            ")\n";
    outs.push_back(op);
  }
  text += "  return ";
  for (size_t i = 0; i < outs.size(); ++i) text += (i ? ", " : "") + outs[i];
  text += "\n}\n";
  return {"reductions of " + t + "[" + std::to_string(rows) + ", " + std::to_string(columns) +
              "] over " + axes + (keepdims ? " keepdims" : ""),
          text,
          {{"R", rows}, {"C", columns}}};
}

// emptyReductions for every dtype and every way an extent can be empty.
inline std::vector<Case> allEmptyReductions() {
  std::vector<Case> out;
  for (const char* t : {"f32", "f64", "f16", "bf16", "i32", "i64"})
    for (bool keep : {false, true}) {
      out.push_back(emptyReductions(t, "[1]", 3, 0, keep));     // reduced extent 0
      out.push_back(emptyReductions(t, "[0]", 0, 5, keep));     // reduced extent 0, columns
      out.push_back(emptyReductions(t, "[1]", 0, 5, keep));     // kept extent 0
      out.push_back(emptyReductions(t, "[0]", 4, 0, keep));     // kept extent 0, columns
      out.push_back(emptyReductions(t, "[0, 1]", 0, 0, keep));  // everything empty
      out.push_back(emptyReductions(t, "[0, 1]", 0, 7, keep));
    }
  // No rows beside a [1] value (the OpInfo run's layer_norm of a [0, 1] input): the kernel's
  // domain is the rows' shape, which the [1] value broadcasts into, not the value with the most
  // elements (lowering failed: "z does not fit the domain").
  out.push_back({"[0, 1] rows beside a [1] weight",
                 "graph e(x: f32[R, C], w: bf16[C]) {\n"
                 "  s = reduce_sum(x, axes=[1], keepdims=true)\n"
                 "  y = mul(x, s)\n"
                 "  wf = cast(w, to=f32)\n"
                 "  z = mul(y, wf)\n"
                 "  return x, z\n"
                 "}\n",
                 {{"R", 0}, {"C", 1}}});
  return out;
}

}  // namespace stitch::numerics
