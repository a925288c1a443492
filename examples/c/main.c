/*
 * A C99 program that uses Stitch through its public C API only.
 *
 *   1. builds y = relu(add(x, b)) op by op, with x: f32[N, 4] (N symbolic) and b: f32[4];
 *   2. parses s = reduce_sum(mul(x, 2), axes=[1]) from .stitch text;
 *   3. compiles both on the "reference" backend, asks for the output shapes for N = 3, runs them
 *      on DLTensors this program owns, prints the results and checks them against values
 *      computed here in plain C.
 *
 * Every status is checked; a failure prints stitch_status_string() and stitch_last_error().
 * Returns 0 when every result matches.
 *
 * Build against an installed Stitch with CMake (see CMakeLists.txt here) or with pkg-config:
 *   cc -std=c99 main.c $(pkg-config --cflags --libs stitch) -o stitch_example
 */
#include <stdio.h>
#include <stdlib.h>
#include <stitch/stitch.h>

#define ROWS 3 /* the size bound to the symbol N at run time */
#define COLS 4

/* Checks a status; on failure reports it and jumps to the cleanup at `done`. */
#define CHECK(call)                                                            \
  do {                                                                         \
    stitch_status_t st_ = (call);                                              \
    if (st_ != STITCH_OK) {                                                    \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call, \
              stitch_status_string(st_), stitch_last_error());                 \
      goto done;                                                               \
    }                                                                          \
  } while (0)

static const char* kParsedGraph =
    "# Twice x, summed over each row.\n"
    "graph scale_sum(x: f32[N, 4]) {\n"
    "  y = mul(x, 2.0)\n"
    "  s = reduce_sum(y, axes=[1])\n"
    "  return s\n"
    "}\n";

/* A compact row-major f32 tensor on the host, borrowing `data` and `shape`. */
static DLTensor host_f32(float* data, int64_t* shape, int ndim) {
  DLTensor t;
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = NULL;
  t.byte_offset = 0;
  return t;
}

static float abs_f32(float v) { return v < 0.0f ? -v : v; }

static int close_enough(float got, float want) {
  return abs_f32(got - want) <= 1e-5f + 1e-5f * abs_f32(want);
}

int main(void) {
  int ok = 0;
  stitch_graph_t built = NULL;
  stitch_graph_t parsed = NULL;
  stitch_engine_t engine = NULL;
  stitch_program_t relu_add = NULL;
  stitch_program_t scale_sum = NULL;
  float* y = NULL;

  float x[ROWS * COLS];
  float b[COLS] = {0.5f, -0.25f, -2.0f, 1.0f};
  float s[ROWS];
  int64_t x_shape[2] = {ROWS, COLS};
  int64_t b_shape[1] = {COLS};
  int64_t s_shape[1] = {ROWS};
  int64_t y_shape[2] = {0, 0};
  size_t y_rank = 0;
  size_t y_count = 1;
  DLTensor inputs[2];
  DLTensor out;
  size_t i, j;
  int mismatches = 0;

  for (i = 0; i < ROWS * COLS; ++i) x[i] = (float)i * 0.5f - 2.5f;

  printf("stitch %s\n", stitch_version());

  /* 1. y = relu(add(x, b)), built op by op. */
  {
    stitch_dim_t x_dims[2];
    stitch_dim_t b_dims[1];
    stitch_value_t vx, vb, operands[2], vsum, vy;
    x_dims[0].size = 0;
    x_dims[0].symbol = "N";
    x_dims[1].size = COLS;
    x_dims[1].symbol = NULL;
    b_dims[0].size = COLS;
    b_dims[0].symbol = NULL;

    CHECK(stitch_graph_create("relu_add", &built));
    CHECK(stitch_graph_add_input(built, "x", STITCH_F32, x_dims, 2, &vx));
    CHECK(stitch_graph_add_input(built, "b", STITCH_F32, b_dims, 1, &vb));
    operands[0] = vx;
    operands[1] = vb;
    CHECK(stitch_graph_add_op(built, "add", operands, 2, NULL, 0, "xb", &vsum));
    CHECK(stitch_graph_add_op(built, "relu", &vsum, 1, NULL, 0, "y", &vy));
    CHECK(stitch_graph_set_outputs(built, &vy, 1));
    CHECK(stitch_graph_verify(built));
  }

  /* 2. The same kind of graph, parsed from text. */
  CHECK(stitch_graph_parse(kParsedGraph, "scale_sum.stitch", &parsed));

  /* 3. An engine on the reference interpreter; compile both graphs. */
  {
    const char* keys[1] = {"backend"};
    const char* values[1] = {"reference"};
    CHECK(stitch_engine_create(keys, values, 1, &engine));
  }
  printf("backend: %s\n", stitch_engine_backend(engine));
  CHECK(stitch_program_compile(engine, built, &relu_add));
  CHECK(stitch_program_compile(engine, parsed, &scale_sum));
  /* Programs hold copies; the graphs are no longer needed. */
  stitch_graph_destroy(built);
  built = NULL;
  stitch_graph_destroy(parsed);
  parsed = NULL;

  /* Output shape of relu_add for x: f32[3, 4], b: f32[4]; allocate the output to fit. */
  inputs[0] = host_f32(x, x_shape, 2);
  inputs[1] = host_f32(b, b_shape, 1);
  CHECK(stitch_program_output_shape(relu_add, inputs, 2, 0, y_shape, 2, &y_rank));
  if (y_rank != 2 || y_shape[0] != ROWS || y_shape[1] != COLS) {
    fprintf(stderr, "unexpected output shape: rank %zu [%lld, %lld]\n", y_rank,
            (long long)y_shape[0], (long long)y_shape[1]);
    goto done;
  }
  for (i = 0; i < y_rank; ++i) y_count *= (size_t)y_shape[i];
  y = (float*)malloc(y_count * sizeof(float));
  if (y == NULL) {
    fprintf(stderr, "out of memory\n");
    goto done;
  }

  out = host_f32(y, y_shape, (int)y_rank);
  CHECK(stitch_program_run(relu_add, inputs, 2, &out, 1, NULL));
  printf("relu_add: y = relu(x + b), shape [%lld, %lld]\n", (long long)y_shape[0],
         (long long)y_shape[1]);
  for (i = 0; i < ROWS; ++i) {
    printf("  ");
    for (j = 0; j < COLS; ++j) {
      float v = x[i * COLS + j] + b[j];
      float want = v > 0.0f ? v : 0.0f;
      float got = y[i * COLS + j];
      printf(" %8.4f", got);
      if (!close_enough(got, want)) {
        fprintf(stderr, "relu_add: y[%zu][%zu] = %g, expected %g\n", i, j, got, want);
        ++mismatches;
      }
    }
    printf("\n");
  }

  out = host_f32(s, s_shape, 1);
  CHECK(stitch_program_run(scale_sum, inputs, 1, &out, 1, NULL));
  printf("scale_sum: s = reduce_sum(2 * x, axes=[1]), shape [%lld]\n  ", (long long)s_shape[0]);
  for (i = 0; i < ROWS; ++i) {
    float want = 0.0f;
    for (j = 0; j < COLS; ++j) want += 2.0f * x[i * COLS + j];
    printf(" %8.4f", s[i]);
    if (!close_enough(s[i], want)) {
      fprintf(stderr, "scale_sum: s[%zu] = %g, expected %g\n", i, s[i], want);
      ++mismatches;
    }
  }
  printf("\n");

  if (mismatches == 0) {
    printf("all results match\n");
    ok = 1;
  }

done:
  free(y);
  stitch_program_destroy(scale_sum);
  stitch_program_destroy(relu_add);
  stitch_engine_destroy(engine);
  stitch_graph_destroy(parsed);
  stitch_graph_destroy(built);
  return ok ? 0 : 1;
}
