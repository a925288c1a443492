/* Compiled as C99 (-std=c99 -pedantic): stitch.h must be a plain C header. Builds, parses, runs
 * and exercises error paths through the C API only; exits non-zero on any failure. */
#include <math.h>
#include <stdio.h>
#include <stitch/stitch.h>
#include <string.h>

static int failures = 0;

#define EXPECT(cond)                                                                      \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "%s:%d: expected %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              stitch_last_error());                                                       \
      ++failures;                                                                         \
    }                                                                                     \
  } while (0)

int main(void) {
  stitch_graph_t g = NULL;
  stitch_engine_t e = NULL;
  stitch_program_t p = NULL;
  stitch_value_t x, b, s, y;
  stitch_dim_t xdims[2] = {{0, "N"}, {3, NULL}};
  stitch_dim_t bdims[1] = {{3, NULL}};
  float xs[6] = {1, -2, 3, -4, 5, -6};
  float bs[3] = {0.5f, 0.5f, 0.5f};
  float ys[6];
  int64_t xshape[2] = {2, 3}, bshape[1] = {3}, yshape[2] = {0, 0};
  size_t rank = 0;
  DLTensor in[2], out[1];
  int i;

  EXPECT(strcmp(stitch_version(), "0.1.0") == 0);
  EXPECT(stitch_version_number() == STITCH_VERSION_NUMBER);
  EXPECT(strcmp(stitch_status_string(STITCH_ERROR_PARSE), "STITCH_ERROR_PARSE") == 0);
  EXPECT(strcmp(stitch_dtype_name(STITCH_BF16), "bf16") == 0);

  EXPECT(stitch_graph_create("g", &g) == STITCH_OK);
  EXPECT(stitch_graph_add_input(g, "x", STITCH_F32, xdims, 2, &x) == STITCH_OK);
  EXPECT(stitch_graph_add_input(g, "b", STITCH_F32, bdims, 1, &b) == STITCH_OK);
  {
    stitch_value_t ops[2];
    ops[0] = x;
    ops[1] = b;
    EXPECT(stitch_graph_add_op(g, "add", ops, 2, NULL, 0, "s", &s) == STITCH_OK);
    EXPECT(stitch_graph_add_op(g, "relu", &s, 1, NULL, 0, NULL, &y) == STITCH_OK);
    /* A bad op leaves a message and the graph unchanged. */
    EXPECT(stitch_graph_add_op(g, "frobnicate", &s, 1, NULL, 0, NULL, NULL) ==
           STITCH_ERROR_INVALID_GRAPH);
    EXPECT(strstr(stitch_last_error(), "frobnicate") != NULL);
  }
  EXPECT(stitch_graph_set_outputs(g, &y, 1) == STITCH_OK);
  EXPECT(stitch_graph_verify(g) == STITCH_OK);

  {
    const char* keys[1] = {"backend"};
    const char* values[1] = {"reference"};
    EXPECT(stitch_engine_create(keys, values, 1, &e) == STITCH_OK);
  }
  EXPECT(stitch_program_compile(e, g, &p) == STITCH_OK);
  stitch_graph_destroy(g); /* the program keeps its own copy */

  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  in[0].data = xs;
  in[0].device.device_type = kDLCPU;
  in[0].ndim = 2;
  in[0].dtype.code = kDLFloat;
  in[0].dtype.bits = 32;
  in[0].dtype.lanes = 1;
  in[0].shape = xshape;
  in[1] = in[0];
  in[1].data = bs;
  in[1].ndim = 1;
  in[1].shape = bshape;
  EXPECT(stitch_program_output_shape(p, in, 2, 0, yshape, 2, &rank) == STITCH_OK);
  EXPECT(rank == 2 && yshape[0] == 2 && yshape[1] == 3);
  out[0] = in[0];
  out[0].data = ys;
  out[0].shape = yshape;
  EXPECT(stitch_program_run(p, in, 2, out, 1, NULL) == STITCH_OK);
  for (i = 0; i < 6; ++i) {
    float want = xs[i] + 0.5f > 0 ? xs[i] + 0.5f : 0.0f;
    EXPECT(fabsf(ys[i] - want) < 1e-6f);
  }
  /* Misuse returns a status, never crashes. */
  EXPECT(stitch_program_run(p, in, 1, out, 1, NULL) == STITCH_ERROR_SHAPE_MISMATCH);
  EXPECT(stitch_program_run(NULL, in, 2, out, 1, NULL) == STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT(stitch_graph_parse("graph g(x: f32[2]) {\n  y = exp(x\n}\n", "bad.stitch", &g) ==
         STITCH_ERROR_PARSE);
  EXPECT(strncmp(stitch_last_error(), "bad.stitch:2:", 13) == 0);

  stitch_program_destroy(p);
  stitch_engine_destroy(e);
  stitch_graph_destroy(NULL);
  stitch_module_destroy(NULL);
  stitch_engine_destroy(NULL);
  stitch_program_destroy(NULL);
  if (failures == 0) printf("c_header_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
