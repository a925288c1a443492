// Graphs that read data-dependent indices, for the index-check tests of every backend (the C API
// on reference and cpu, the CUDA kernels emulated on the host and on a device): each names the
// input that holds indices, the range they must lie in, and one element to make bad. Filled with
// i % bound the run must succeed; with the bad element it must fail with IndexOutOfRange and a
// message holding `message` (support/error.h's format: the op, its name, the index, the size).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace stitch::testcases {

struct IndexCase {
  std::string name;
  std::string text;
  std::map<std::string, int64_t> dims;
  size_t input = 1;     // the input holding indices
  int64_t bound = 0;    // valid indices: [0, bound); the input holds i % bound
  int64_t at = 0;       // the element made bad
  int64_t bad = 0;      // its value
  std::string message;  // in the error's message, whatever the backend
};

inline std::vector<IndexCase> indexCases() {
  return {
      // A gather of an input: one load at the checked index.
      {"gather_input",
       "graph gather_input(x: f32[N, 7], i: i64[N, 3]) {\n"
       "  y = gather(x, i, axis=1)\n"
       "  return y\n"
       "}\n",
       {{"N", 5}},
       1,
       7,
       8,
       7,
       "gather 'y' (axis 1): index 7 is out of bounds for size 7"},
      {"gather_negative_i32",
       "graph gather_negative_i32(x: f32[N, 7], i: i32[N, 3]) {\n"
       "  y = gather(x, i, axis=-1)\n"
       "  z = mul(y, 2)\n"
       "  return z\n"
       "}\n",
       {{"N", 5}},
       1,
       7,
       3,
       -1,
       "index -1 is out of bounds for size 7"},
      // A gather of computed data, one per row: a one-hot row reduction with check_index
      // (passes/gather_rows.h), which compiled backends name 'h_index' and the reference 'h'.
      {"gather_computed_row",
       "graph gather_computed_row(x: f32[N, 7], j: i64[N, 1]) {\n"
       "  e = exp(x)\n"
       "  h = gather(e, j, axis=1)\n"
       "  return h\n"
       "}\n",
       {{"N", 6}},
       1,
       7,
       4,
       9,
       "index 9 is out of bounds for size 7"},
      // A label checked where it selects a class (the PyTorch hook's nll_loss): -100 is ignored.
      {"label_check",
       "graph label_check(logits: f32[N, 10], labels: i64[N, 1]) {\n"
       "  valid = ne(labels, -100)\n"
       "  t = select(valid, labels, 0)\n"
       "  c = check_index(t, size=[10])\n"
       "  cls = iota(shape=[N, 10], axis=1, dtype=i64)\n"
       "  is = eq(cls, c)\n"
       "  hit = logical_and(is, valid)\n"
       "  picked = select(hit, logits, 0)\n"
       "  nll = reduce_sum(picked, axes=[1])\n"
       "  loss = reduce_mean(nll)\n"
       "  return loss\n"
       "}\n",
       {{"N", 9}},
       1,
       10,
       5,
       12,
       "check_index 'c': index 12 is out of bounds for size 10"},
      // Many rows, split over tasks or blocks: one bad index in the middle.
      {"gather_many_rows",
       "graph gather_many_rows(x: f32[N, 64], i: i64[N, 64]) {\n"
       "  y = gather(x, i, axis=1)\n"
       "  s = reduce_sum(y, axes=[1])\n"
       "  return s\n"
       "}\n",
       {{"N", 2048}},
       1,
       64,
       2048 * 37 + 5,
       64,
       "index 64 is out of bounds for size 64"},
      // A symbolic axis: the bound is a size argument.
      {"gather_symbolic_axis",
       "graph gather_symbolic_axis(x: f32[N, M], i: i64[N, 2]) {\n"
       "  y = gather(x, i, axis=1)\n"
       "  return y\n"
       "}\n",
       {{"N", 4}, {"M", 6}},
       1,
       6,
       5,
       -7,
       "index -7 is out of bounds for size 6"},
      {"check_symbolic_size",
       "graph check_symbolic_size(x: f32[N, C], l: i32[N]) {\n"
       "  c = check_index(l, size=[C])\n"
       "  k = cast(c, to=f32)\n"
       "  s = reduce_sum(x, axes=[1])\n"
       "  y = add(s, k)\n"
       "  return y\n"
       "}\n",
       {{"N", 33}, {"C", 5}},
       1,
       5,
       32,
       5,
       "check_index 'c': index 5 is out of bounds for size 5"},
  };
}

}  // namespace stitch::testcases
