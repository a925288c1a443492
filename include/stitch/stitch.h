/*
 * stitch.h — the public C API of Stitch, a JIT fusion compiler for the memory-bound parts of
 * deep-learning graphs. This header is the library's only stable ABI; it compiles as C99.
 *
 * Conventions (after sqlite3, ggml and tvm-ffi):
 *   - Objects are opaque handles with _create/_destroy pairs; destroy(NULL) is a harmless no-op.
 *   - Every fallible call returns a stitch_status_t (STITCH_OK == 0). On failure the message of
 *     the failure is available from stitch_last_error() on the same thread until the next failing
 *     call on that thread. No C++ exception ever crosses this boundary.
 *   - Ownership is written on each function. Unless stated otherwise, a call never takes ownership
 *     of its arguments, strings passed in are copied, and out-parameters are left untouched when
 *     the call fails.
 *   - Tensors are DLPack DLTensor (<dlpack/dlpack.h>). Supported dtypes: f16, bf16, f32, f64,
 *     i32, i64 and bool (bool as {kDLBool or kDLUInt, 8 bits}).
 *   - Engines and programs may be used from several threads at once. A graph under construction
 *     must not be modified from two threads at once.
 *   - Handles: every handle the library returns is registered until it is destroyed. Passing a
 *     handle that is not live (destroyed already, never returned by the library, or a handle of
 *     another kind cast to this one) to a call that returns a status fails with
 *     STITCH_ERROR_INVALID_ARGUMENT; to a call that returns a value, gives NULL/0; to a destroy
 *     call, is ignored and logged as an error (a double destroy is harmless). The check never
 *     reads the handle's memory. It cannot tell a stale handle from a new handle of the same kind
 *     that the allocator placed at the same address: do not use a handle after destroying it.
 */
#ifndef STITCH_STITCH_H
#define STITCH_STITCH_H

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(STITCH_BUILDING_LIBRARY)
#define STITCH_API __attribute__((visibility("default")))
#else
#define STITCH_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------- */

#define STITCH_VERSION_MAJOR 0
#define STITCH_VERSION_MINOR 1
#define STITCH_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH. */
#define STITCH_VERSION_NUMBER \
  (STITCH_VERSION_MAJOR * 10000 + STITCH_VERSION_MINOR * 100 + STITCH_VERSION_PATCH)

/* The version of the library loaded at run time, as "MAJOR.MINOR.PATCH". Static storage. */
STITCH_API const char* stitch_version(void);
/* STITCH_VERSION_NUMBER of the library loaded at run time. */
STITCH_API int stitch_version_number(void);

/* ---------------------------------------------------------------------------------------------
 * Status and errors
 * ------------------------------------------------------------------------------------------- */

typedef enum {
  STITCH_OK = 0,
  STITCH_ERROR_INVALID_ARGUMENT = 1,    /* NULL handle, index out of range, bad option value */
  STITCH_ERROR_PARSE = 2,               /* .stitch text is malformed (message is FILE:LINE:COL) */
  STITCH_ERROR_INVALID_GRAPH = 3,       /* dtype/shape/attribute error building or verifying */
  STITCH_ERROR_SHAPE_MISMATCH = 4,      /* run-time tensors disagree with the graph's signature */
  STITCH_ERROR_BACKEND_UNAVAILABLE = 5, /* the backend is not built in or has no device */
  STITCH_ERROR_COMPILE = 6,             /* generating or compiling a kernel failed */
  STITCH_ERROR_UNSUPPORTED = 7,         /* valid request this version does not handle */
  /* A buffer larger than the host's memory (checked before allocating) or the device can give: */
  STITCH_ERROR_OUT_OF_MEMORY = 8,
  STITCH_ERROR_IO = 9,        /* a file could not be read or written */
  STITCH_ERROR_INTERNAL = 10, /* a bug in Stitch; please report it */
  /* A run read an index outside its range (a gather's index, a check_index): the data is wrong,
   * as PyTorch's "index out of bounds". The message reads
   *   graph 'G': OP 'NAME'[ (axis A)]: index V is out of bounds for size N
   * (OP is gather or check_index, NAME the value's name in the graph as compiled); the outputs
   * of that run are unspecified. */
  STITCH_ERROR_INDEX_OUT_OF_RANGE = 11
} stitch_status_t;

/* A constant name for a status, e.g. "STITCH_ERROR_PARSE"; "STITCH_UNKNOWN_STATUS" otherwise. */
STITCH_API const char* stitch_status_string(stitch_status_t status);

/* The message of the last failed call on this thread ("" if none). Owned by the library; valid
 * until the next failing call on this thread. */
STITCH_API const char* stitch_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * The environment
 *
 * STITCH_* variables configure the library (README, "Environment variables"). Each is read where
 * it takes effect, which may be late in a run or never; this call reads them all up front.
 * ------------------------------------------------------------------------------------------- */

/* Checks every STITCH_* variable the README lists that is set (unset or empty means the default),
 * each with the code that reads it when it is used, so the check and the use cannot disagree.
 * Returns STITCH_OK when every value is valid; otherwise STITCH_ERROR_INVALID_ARGUMENT, and
 * stitch_last_error() has one line per bad value naming the variable, the value and the valid
 * values ("STITCH_FUSION=bogus is not valid; valid values: stitch, basic, off"). Paths
 * (STITCH_CACHE_DIR, STITCH_DUMP_DIR, STITCH_LIBRARY, STITCH_CUDA_LIBRARY, STITCH_NVRTC_LIBRARY,
 * STITCH_HIP_LIBRARY) take any value and are not opened here: a library that does not load is
 * logged at warn level, naming the variable, the path and the loader's reason, when it is first
 * needed. Side effects: applies STITCH_LOG_LEVEL, and warns once per process about STITCH_*
 * variables the library does not know (a typo). Takes and allocates nothing; reads the process
 * environment, so do not call it while another thread changes the environment.
 * stitch_engine_create, stitch_graph_explain_plan and stitch_graph_codegen make the same check
 * and fail the same way; the command line calls it at startup (exit 2), the Python hook when it
 * is entered (ValueError). */
STITCH_API stitch_status_t stitch_environment_check(void);

/* ---------------------------------------------------------------------------------------------
 * Data types
 * ------------------------------------------------------------------------------------------- */

typedef enum {
  STITCH_F16 = 0,
  STITCH_BF16 = 1,
  STITCH_F32 = 2,
  STITCH_F64 = 3,
  STITCH_I32 = 4,
  STITCH_I64 = 5,
  STITCH_BOOL = 6
} stitch_dtype_t;

/* "f16", "bf16", ... as in the text format; "?" for an invalid value. Static storage. */
STITCH_API const char* stitch_dtype_name(stitch_dtype_t dtype);

/* ---------------------------------------------------------------------------------------------
 * Graphs
 *
 * A graph is a function from named input tensors to output tensors, in SSA form. Dims are static
 * (>= 0) or symbolic: a symbol is a name bound to a size when the program runs, equal wherever it
 * appears. Graphs are built op by op or parsed from the .stitch text format.
 * ------------------------------------------------------------------------------------------- */

typedef struct stitch_graph_s* stitch_graph_t;
typedef struct stitch_module_s* stitch_module_t;

/* A value in a graph (an input, a constant or an op result): an index, valid in its graph only. */
typedef int32_t stitch_value_t;

/* One dimension of a type: symbol == NULL means static with size `size`; otherwise symbolic, and
 * the symbol must be an identifier ([A-Za-z_][A-Za-z0-9_]*; "" is an error, not a static dim). */
typedef struct {
  int64_t size;
  const char* symbol;
} stitch_dim_t;

typedef enum {
  STITCH_ATTR_INT = 0,   /* i */
  STITCH_ATTR_FLOAT = 1, /* f */
  STITCH_ATTR_BOOL = 2,  /* i (0 or 1) */
  STITCH_ATTR_INTS = 3,  /* ints[0..count) */
  STITCH_ATTR_DIMS = 4,  /* dims[0..count), for shape= lists (ints and symbols) */
  STITCH_ATTR_DTYPE = 5, /* i (a stitch_dtype_t) */
  STITCH_ATTR_IDENT = 6  /* s, an identifier such as "tanh" for gelu's approximate= */
} stitch_attr_kind_t;

/* An attribute `name=value` of an op, as in the text format. Only the fields of its kind are read.
 */
typedef struct {
  const char* name;
  stitch_attr_kind_t kind;
  int64_t i;
  double f;
  const int64_t* ints;
  const stitch_dim_t* dims;
  size_t count;
  const char* s;
} stitch_attr_t;

/* Creates an empty graph named `name` (an identifier). The caller owns *out and frees it with
 * stitch_graph_destroy. */
STITCH_API stitch_status_t stitch_graph_create(const char* name, stitch_graph_t* out);

/* Frees a graph the caller owns. NULL is a no-op. Never pass a graph borrowed from a module. */
STITCH_API void stitch_graph_destroy(stitch_graph_t graph);

/* Adds an input parameter named `name` of type dtype[dims[0], ..., dims[rank-1]]. */
STITCH_API stitch_status_t stitch_graph_add_input(stitch_graph_t graph, const char* name,
                                                  stitch_dtype_t dtype, const stitch_dim_t* dims,
                                                  size_t rank, stitch_value_t* out);

/* Adds a scalar constant (type dtype[]) with the given value; integral dtypes need an integral
 * value in range. */
STITCH_API stitch_status_t stitch_graph_add_constant(stitch_graph_t graph, double value,
                                                     stitch_dtype_t dtype, stitch_value_t* out);

/* Adds the op `op` ("add", "reduce_sum", "layer_norm", ...; see README) applied to `operands`
 * with `attrs`. `name` names the result (NULL: a fresh name is made). Its type is inferred; an
 * unknown op, a bad operand, dtype, shape or attribute fails with STITCH_ERROR_INVALID_GRAPH and
 * leaves the graph unchanged. */
STITCH_API stitch_status_t stitch_graph_add_op(stitch_graph_t graph, const char* op,
                                               const stitch_value_t* operands, size_t num_operands,
                                               const stitch_attr_t* attrs, size_t num_attrs,
                                               const char* name, stitch_value_t* out);

/* Sets the graph's outputs (replacing any earlier call). A value may be listed more than once. */
STITCH_API stitch_status_t stitch_graph_set_outputs(stitch_graph_t graph,
                                                    const stitch_value_t* values, size_t count);

/* Checks every invariant of the graph (types, SSA order, names, outputs set). */
STITCH_API stitch_status_t stitch_graph_verify(stitch_graph_t graph);

/* Parses text holding exactly one graph. `filename` (may be NULL: "<input>") is used in errors,
 * which read "FILE:LINE:COL: error: MESSAGE". The caller owns *out. */
STITCH_API stitch_status_t stitch_graph_parse(const char* text, const char* filename,
                                              stitch_graph_t* out);

/* Prints the graph in the .stitch format into buf (capacity `capacity`, NUL-terminated, truncated
 * if short). *needed (may be NULL) receives the full length excluding the NUL. */
STITCH_API stitch_status_t stitch_graph_print(stitch_graph_t graph, char* buf, size_t capacity,
                                              size_t* needed);

/* Inspection. Strings returned are owned by the graph and live as long as it does. */
STITCH_API const char* stitch_graph_name(stitch_graph_t graph);
STITCH_API size_t stitch_graph_num_inputs(stitch_graph_t graph);
STITCH_API size_t stitch_graph_num_outputs(stitch_graph_t graph);
STITCH_API size_t stitch_graph_num_ops(stitch_graph_t graph);
/* Type of input (is_output == 0) or output (is_output != 0) number `index`: its name, dtype and
 * rank; dims (may be NULL) receives min(rank, max_dims) dims whose symbols the graph owns. */
STITCH_API stitch_status_t stitch_graph_value_info(stitch_graph_t graph, int is_output,
                                                   size_t index, const char** name,
                                                   stitch_dtype_t* dtype, size_t* rank,
                                                   stitch_dim_t* dims, size_t max_dims);

/* A module is a parsed .stitch file: one or more graphs. */

/* Parses text holding one or more graphs. The caller owns *out. */
STITCH_API stitch_status_t stitch_module_parse(const char* text, const char* filename,
                                               stitch_module_t* out);
/* Reads and parses the file at `path` (errors name it). The caller owns *out. */
STITCH_API stitch_status_t stitch_module_parse_file(const char* path, stitch_module_t* out);
/* Frees a module and every graph borrowed from it. NULL is a no-op. */
STITCH_API void stitch_module_destroy(stitch_module_t module);
STITCH_API size_t stitch_module_num_graphs(stitch_module_t module);
/* Graph number `index` (or NULL if out of range), borrowed: owned by the module, valid until it
 * is destroyed; never pass it to stitch_graph_destroy. */
STITCH_API stitch_graph_t stitch_module_graph(stitch_module_t module, size_t index);
/* The graph named `name`, borrowed as above, or NULL if there is none. */
STITCH_API stitch_graph_t stitch_module_find_graph(stitch_module_t module, const char* name);

/* Plans `graph` for concrete sizes without running it and explains the plan: which ops become
 * which kernels, each kernel's mapping and the stitch scheme of every edge inside it, estimated
 * bytes and time against the unfused plan, and why each edge between kernels was cut. The graph
 * goes through Stitch's graph passes first (composites decomposed, reshapes and constants folded,
 * CSE, DCE), as a program would. Options are key/value strings:
 *   "target": sm_90 (default) | sm_80 | gfx90a | host    the hardware profile priced
 *   "fusion": stitch | basic | off   (default: $STITCH_FUSION, else stitch)
 *   "plan_candidate": 0 (default) .. 64   which plan of the planner's search: 0 is its pick; k is
 *             the k-th next best distinct plan it evaluated, by the cost model (for measuring the
 *             model against the hardware); STITCH_ERROR_INVALID_ARGUMENT when it saw fewer
 *   "format": text (default) | dot | json
 *   "backend": auto | cuda | hip | cpu   instead of "target": plan for that backend's own machine
 *             (its measured profile), as its programs do, and, when its kernel cache holds an
 *             autotuning decision for this graph and these sizes on this machine (engine option
 *             "autotune"), explain the plan that decision runs; the text format then starts with
 *             what was measured (each candidate's model estimate and measured time). Nothing is
 *             run or measured; a device is needed for a GPU backend.
 * `symbols`/`sizes` give every symbolic dim of the inputs a size (all must be given). The
 * explanation is written as by stitch_graph_print. No device is needed. */
STITCH_API stitch_status_t stitch_graph_explain_plan(stitch_graph_t graph, const char* const* keys,
                                                     const char* const* values, size_t num_options,
                                                     const char* const* symbols,
                                                     const int64_t* sizes, size_t num_symbols,
                                                     char* buf, size_t capacity, size_t* needed);

/* ---------------------------------------------------------------------------------------------
 * Engines and programs
 *
 * An engine is a configured backend. Options are key/value strings, validated at creation:
 *   "backend": auto | cuda | hip | cpu | reference   (default: $STITCH_BACKEND, else auto)
 *   "fusion":  stitch | basic | off   (default: $STITCH_FUSION, else stitch): how far kernels are
 *              fused; part of a program's identity. The reference backend always runs the graph
 *              unfused (it is the oracle), but plans as the others do, so STITCH_DUMP=plan shows
 *              what a fusing backend makes of each input signature.
 *   "plan_candidate": 0 (default) .. 64   run the planner's k-th next best plan instead of its
 *              pick (as stitch_graph_explain_plan says), to measure alternative plans; a signature
 *              for which the search saw fewer plans fails its run with
 *              STITCH_ERROR_INVALID_ARGUMENT. Part of a program's identity, like "fusion".
 *   "remote_cache": redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] | off   (default:
 *              $STITCH_REMOTE_CACHE, else off): a Redis server that processes share compiled
 *              kernels and whole-program entries through (README, "A fleet shares compiled
 *              kernels"); its other settings come from STITCH_REMOTE_CACHE_*. The layer belongs
 *              to the backend's process-wide kernel cache, as the disk layer does, so this option
 *              sets it for every engine of that backend in the process (the latest engine made
 *              with the option wins). A server that cannot be reached is not an error: runs go on
 *              without it. A malformed URL, or a build without hiredis, is
 *              STITCH_ERROR_INVALID_ARGUMENT.
 *   "dump": a comma list of plan, source, llvm; empty: nothing   (default: $STITCH_DUMP, else
 *              nothing): what each program of the engine writes for each new input signature
 *              (README, "Environment variables", STITCH_DUMP). A bad item fails as the variable
 *              does, with the option named ("dump=plan,ptx is not valid; valid values: ...").
 *   "dump_dir": a directory; empty: the current directory   (default: $STITCH_DUMP_DIR, else the
 *              current directory): where those files go. It is not created; a file that cannot be
 *              written there is logged at warn level and the run goes on.
 *   "autotune": a boolean   (default: $STITCH_AUTOTUNE, else off): on a program's first run of
 *              an input signature, build the planner's pick and its next best plans, time each on
 *              the run's inputs with scratch outputs (the caller's outputs are written once, by
 *              the plan chosen), and run the fastest; a plan whose outputs differ from the pick's
 *              by more than the reference tolerance is never chosen. The decision and the chosen
 *              plan are kept in the kernel cache's disk and remote layers, keyed by the program
 *              entry's parts and the machine, so another process or host of the same machine runs
 *              it with no measurement (README, "Autotuning"). Exclusive with a plan_candidate
 *              other than 0 (STITCH_ERROR_INVALID_ARGUMENT).
 *   "autotune_candidates": 1 .. 16   (default: $STITCH_AUTOTUNE_CANDIDATES, else 3): how many
 *              plans, the pick included; part of the decision's key.
 *   "autotune_budget_ms": 1 .. 600000   (default: $STITCH_AUTOTUNE_BUDGET_MS, else 1000): the
 *              time one signature's tuning may take after the pick is built: building and
 *              compiling the other plans, then timing rounds (at least 3, at most 25).
 * Defaults come from the STITCH_* environment variables when set; an explicit option wins over
 * the environment. An unknown key or value fails with STITCH_ERROR_INVALID_ARGUMENT listing the
 * valid ones. Asking for a backend this build or machine lacks fails with
 * STITCH_ERROR_BACKEND_UNAVAILABLE; there is no silent fallback (only "auto" chooses).
 *
 * A program is a graph compiled by an engine. It is shape-polymorphic: symbolic dims are bound
 * from the input tensors at each run, and concrete kernels are made per input signature. With
 * STITCH_DUMP=plan (or the engine option "dump"), the plan made for each new signature is written
 * to $STITCH_DUMP_DIR (or "dump_dir"; default: the current directory) as GRAPH.SIGNATURE.plan.txt.
 * ------------------------------------------------------------------------------------------- */

typedef struct stitch_engine_s* stitch_engine_t;
typedef struct stitch_program_s* stitch_program_t;

/* Creates an engine from `num_options` key/value pairs (keys/values may be NULL when
 * num_options == 0). The caller owns *out. */
STITCH_API stitch_status_t stitch_engine_create(const char* const* keys, const char* const* values,
                                                size_t num_options, stitch_engine_t* out);
/* Frees an engine. NULL is a no-op. Programs made by it stay valid (they share its state). */
STITCH_API void stitch_engine_destroy(stitch_engine_t engine);
/* The backend the engine resolved to ("reference", "cpu", "cuda", "hip"). Static storage. */
STITCH_API const char* stitch_engine_backend(stitch_engine_t engine);

/* Compiles `graph` (verified first; copied, so the caller may destroy it afterwards) for the
 * engine's backend. The caller owns *out. */
STITCH_API stitch_status_t stitch_program_compile(stitch_engine_t engine, stitch_graph_t graph,
                                                  stitch_program_t* out);
/* Frees a program. NULL is a no-op. */
STITCH_API void stitch_program_destroy(stitch_program_t program);

STITCH_API size_t stitch_program_num_inputs(stitch_program_t program);
STITCH_API size_t stitch_program_num_outputs(stitch_program_t program);

/* Output shapes for inputs of the given shapes (only ndim, shape and dtype of each input are
 * read; data may be NULL). Writes the rank of output `output_index` to *rank and its dims to
 * shape[0..min(rank, max_rank)). Fails with STITCH_ERROR_SHAPE_MISMATCH when the inputs do not
 * fit the graph's signature (wrong count, dtype, rank, a dim, or a symbol bound two ways), or
 * when a value of the graph would exceed 2^62 bytes under them (README, "Sizes"). */
STITCH_API stitch_status_t stitch_program_output_shape(stitch_program_t program,
                                                       const DLTensor* inputs, size_t num_inputs,
                                                       size_t output_index, int64_t* shape,
                                                       size_t max_rank, size_t* rank);

/* Runs the program. `inputs` and `outputs` are caller-owned tensors on the engine's device; the
 * outputs must have the shapes stitch_program_output_shape gives and the graph's dtypes, and are
 * written in place. Tensors must be compact row-major (strides NULL or equal to the compact
 * strides; dims of size 1 may have any stride); others fail with STITCH_ERROR_UNSUPPORTED. A
 * tensor past 2^62 bytes is STITCH_ERROR_INVALID_ARGUMENT; a run whose host buffers would not fit
 * the machine's memory fails with STITCH_ERROR_OUT_OF_MEMORY before allocating. `stream` is the
 * device stream to run on (NULL: the default stream; ignored on the host).
 *
 * Repeat runs: the first run of an input signature plans and compiles it; a later run whose
 * tensors have the dtypes, devices and shapes of an earlier successful run's is checked by
 * comparing them (strides, data and aliasing are checked on every run), so repeating signatures
 * costs a fraction of a microsecond of host time on top of the kernels.
 *
 * Aliasing: inputs may share memory with each other in any way (they are only read). An output
 * may be exactly the memory of an input (same address and byte size: an in-place update such as
 * an optimizer step): on the host backends ("cpu", "reference") the program then writes a
 * temporary and copies it into place after running, so the result is as if the memory were
 * separate; the GPU backends reject it with STITCH_ERROR_UNSUPPORTED in this version. Any other
 * overlap fails with STITCH_ERROR_INVALID_ARGUMENT naming the two tensors: an output that
 * partially overlaps an input, or two outputs that share any memory. Nothing is written when the
 * call fails this way. */
STITCH_API stitch_status_t stitch_program_run(stitch_program_t program, const DLTensor* inputs,
                                              size_t num_inputs, DLTensor* outputs,
                                              size_t num_outputs, void* stream);

/* Statistics of the kernel cache behind an engine's backend. The cache is process-wide per
 * backend (engines of one backend share compiled kernels), so these count every engine's use.
 * The reference backend compiles nothing: all zero. */
typedef struct {
  uint64_t memory_hits; /* kernel found loaded in memory */
  uint64_t memory_misses;
  uint64_t disk_hits; /* object code loaded from STITCH_CACHE_DIR */
  uint64_t disk_misses;
  uint64_t disk_writes;
  uint64_t corrupt_entries; /* disk entries found damaged: ignored, recompiled, rewritten */
  uint64_t compiles;        /* kernels compiled */
  double compile_seconds;   /* time spent compiling them */
  /* Shape classes (README): compiled kernels that take their sizes as arguments, and the distinct
   * sizes they served in all (class_sizes / shape_classes: input signatures a class kernel served
   * on average). 0 on the reference backend. */
  uint64_t shape_classes;
  uint64_t class_sizes;
  /* The remote layer (STITCH_REMOTE_CACHE), asked after a disk miss: verified entries found
   * (written to the disk too), entries not found, entries written, and operations that failed
   * (unreachable server, timeout, error reply; the run went on without the layer). The disk and
   * remote hits, misses and writes count kernels only: a whole-program entry is counted by its
   * program's warm_starts (stitch_program_stats_t), a machine profile not at all; corrupt_entries
   * and remote_errors count entries of every kind. */
  uint64_t remote_hits;
  uint64_t remote_misses;
  uint64_t remote_writes;
  uint64_t remote_errors;
} stitch_cache_stats_t;

STITCH_API stitch_status_t stitch_engine_cache_stats(stitch_engine_t engine,
                                                     stitch_cache_stats_t* out);

/* Statistics of one program's input signatures and their plans. A program keeps its plans per
 * shape class (README, "Shape classes"): the first signature of a class runs the plan search,
 * and a later one re-prices that plan at its own sizes when the cost model decides every kernel
 * as it did there (else it searches, and the class keeps that plan too). With
 * STITCH_SHAPE_CLASSES=0, or a graph without symbolic dims, every signature is searched. */
typedef struct {
  uint64_t signatures;    /* input signatures made so far */
  uint64_t plan_searches; /* of them, planned by the search */
  uint64_t plan_reuses;   /* of them, run with a kept plan of their class */
  uint64_t plan_classes;  /* distinct plan classes among them */
  /* Of the signatures, those run from a whole-program entry of the kernel cache (README, "A
   * fleet shares compiled kernels"), or from a tuning entry under autotuning: an earlier process
   * (or engine) built the signature, and this one loaded its artifact and kernels with no
   * planning and no compiling. */
  uint64_t warm_starts;
} stitch_program_stats_t;

STITCH_API stitch_status_t stitch_program_stats(stitch_program_t program,
                                                stitch_program_stats_t* out);

/* Autotuning of one program's input signatures (engine option "autotune"); all zero when it is
 * off. Each tuned signature is counted once, in `measured` or `from_entries`. */
typedef struct {
  uint64_t measured;     /* signatures this program tuned itself (timing their candidates) */
  uint64_t from_entries; /* signatures that ran the decision of a tuning entry of the kernel
                            cache (an earlier process or another host measured it): no timing */
  uint64_t single_plan;  /* of both, signatures whose search made one plan: nothing to time */
  uint64_t switched;     /* of both, signatures that run a plan other than the cost model's pick */
  double seconds;        /* time this program spent tuning: building, compiling and timing */
} stitch_program_tuning_t;

STITCH_API stitch_status_t stitch_program_tuning(stitch_program_t program,
                                                 stitch_program_tuning_t* out);

/* ---------------------------------------------------------------------------------------------
 * The kernel cache's directory
 *
 * Compiled kernels are kept on disk across processes, one authenticated file per entry, in the
 * directory the environment names: $STITCH_CACHE_DIR, else $XDG_CACHE_HOME/stitch (when it is an
 * absolute path), else $HOME/.cache/stitch. Its entries are kept to about STITCH_CACHE_MAX_MB MiB
 * (default 4096): past that, the least recently used (run or written) are removed until they hold
 * 90% of it. These calls inspect and clean that directory, for tools such as `stitch cache`; they
 * act on the files there, whichever process wrote them, and only on Stitch's own files (entries
 * named <16 hex digits>.stitchk and the temporary files of writers), never on anything else in
 * it. Removing entries is always safe: a missing entry is compiled again. A directory that does
 * not exist yet is empty. Entries are authenticated with the fleet's key (STITCH_CACHE_KEY or
 * STITCH_CACHE_KEY_FILE) or, without one, the user's own key file in the directory
 * (.stitch-key-<uid>), which these calls never remove (README, "A fleet shares compiled
 * kernels").
 *
 * Each fails with STITCH_ERROR_INVALID_ARGUMENT when the disk cache is off (STITCH_CACHE=0), when
 * no directory can be found (none of the variables set), or on a bad STITCH_CACHE,
 * STITCH_CACHE_MAX_MB, STITCH_CACHE_KEY or STITCH_CACHE_KEY_FILE value; with STITCH_ERROR_IO when
 * the directory cannot be read or a file in it cannot be removed. The message says which.
 * ------------------------------------------------------------------------------------------- */

/* What the directory holds. */
typedef struct {
  uint64_t entries;         /* cache entries (regular files named <16 hex digits>.stitchk) */
  uint64_t bytes;           /* their total size */
  uint64_t temporaries;     /* temporary files of writers: being written, or left by a crash */
  uint64_t temporary_bytes; /* their total size (not counted against the limit) */
  uint64_t limit_bytes;     /* STITCH_CACHE_MAX_MB in bytes: the bound on `bytes` */
} stitch_cache_dir_stats_t;

/* What stitch_cache_dir_prune removed. */
typedef struct {
  uint64_t stale_temporaries; /* temporary files of crashed writers (older than five minutes, or
                                 of a process that no longer exists and older than a minute) */
  uint64_t corrupt_entries;   /* entries that fail verification (header, sizes, the
                                 authentication tag under this process's cache key) */
  uint64_t evicted_entries;   /* least recently used entries, when the entries were past the
                                 limit: removed until they hold 90% of it */
  uint64_t freed_bytes;       /* the total size of every file removed */
} stitch_cache_dir_prune_t;

/* The directory in effect, written as by stitch_graph_print (NUL-terminated into buf, truncated
 * to `capacity`; *needed, may be NULL, receives the full length). It need not exist yet. */
STITCH_API stitch_status_t stitch_cache_dir_path(char* buf, size_t capacity, size_t* needed);

/* Counts the entries and temporary files in the directory, and reads the limit. */
STITCH_API stitch_status_t stitch_cache_dir_stats(stitch_cache_dir_stats_t* out);

/* The directory's entries by kind, as their keys name them (each file's header is read, not
 * verified: a count, not a judgement; stitch_cache_dir_prune verifies). */
typedef struct {
  uint64_t kernels;  /* compiled kernels */
  uint64_t programs; /* whole-program entries (warm starts) */
  uint64_t tuned;    /* autotuning decisions with their chosen plans (engine option "autotune") */
  uint64_t profiles; /* machine profiles: a host's or a device's measured figures */
} stitch_cache_dir_kinds_t;

STITCH_API stitch_status_t stitch_cache_dir_kinds(stitch_cache_dir_kinds_t* out);

/* Removes every entry and every temporary file from the directory (a writer whose temporary file
 * goes does not store its entry). *removed_files and *freed_bytes (each may be NULL) receive how
 * many files were removed and their total size. When some file cannot be removed, the call fails
 * with STITCH_ERROR_IO after removing the others, and leaves the outputs untouched. */
STITCH_API stitch_status_t stitch_cache_dir_clear(uint64_t* removed_files, uint64_t* freed_bytes);

/* Cleans the directory without emptying it: removes stale temporary files and corrupt entries
 * (those whose authentication tag does not verify under this process's key included), then, if the
 * entries are past the limit, the least recently used until they hold 90% of it. *out (may be NULL)
 * receives what was removed. When some file cannot be removed or read (a read-only directory), or
 * the key to verify entries with is refused, the call fails with STITCH_ERROR_IO after doing the
 * rest, its message naming the first such file and what was removed, and leaves *out untouched. */
STITCH_API stitch_status_t stitch_cache_dir_prune(stitch_cache_dir_prune_t* out);

/* ---------------------------------------------------------------------------------------------
 * The cost model's calibration
 *
 * The planner ranks plans with a cost model priced for the machine (a built-in profile with the
 * figures a backend measured of its own machine). Autotuning (the engine option "autotune",
 * STITCH_AUTOTUNE=1) leaves in the kernel cache's directory, per tuned input signature, each
 * candidate plan's measured time; stitch_tune_fit fits the model's throughputs and overheads
 * (memory bandwidth, launch overhead, arithmetic rates, grid barrier time) to those times and
 * keeps the result as this machine's calibration, an entry of the kernel cache (shared through
 * the remote layer as the measured profile is). A backend made afterwards (in a new process)
 * plans with it, so do stitch_graph_explain_plan's "backend" option and STITCH_DUMP=plan;
 * STITCH_COST_CALIBRATION=0 ignores it (to compare plans before and after). A stored
 * calibration that is damaged or not valid is ignored, with a warning.
 * ------------------------------------------------------------------------------------------- */

/* Fits the cost model of a backend's machine to the autotuning records of that machine in the
 * kernel cache's directory the environment names, and stores the calibration. Options are
 * key/value strings:
 *   "backend": auto (default) | cuda | hip | cpu   the machine: its records (those measured on
 *             another machine are left out) and its profile, which the fit starts from (without a
 *             calibration stored before: fits do not compound)
 *   "hold_back": 0 (default) .. 90   the percentage of records left out of the fit and scored
 *             apart, chosen by a hash of each record's entry (the same records every time)
 *   "dry_run": a boolean (default false)   fit and report, store nothing
 *   "force": a boolean (default false)   store the fit even when its model picks a plan within 5%
 *             of the fastest in fewer of the fit set's signatures than the profile's did; without
 *             it such a fit is reported and not stored (a calibration must not choose worse)
 * The report (a few lines, under 2 KB) is written as by stitch_graph_print (NUL-terminated into
 * `report`, truncated to `capacity`; *needed, may be NULL, receives the full length): the records
 * and plans used and held back, each set's fit before -> after (median |log(model/measured)|,
 * groups whose model pick measures within 5% of the fastest, groups ranked fastest first, mean
 * Spearman correlation), the figures before -> after, and what was stored. Unlike the text calls
 * above, calling again with a larger buffer fits (and stores) again: from the same records, the
 * same result. Fails with STITCH_ERROR_INVALID_ARGUMENT for a bad option, when the disk cache is
 * off or has no directory (as the stitch_cache_dir_* calls do), and when the records hold fewer
 * than 6 measured plans of this machine (the message says how to make them); with
 * STITCH_ERROR_BACKEND_UNAVAILABLE for a backend that cannot run here; with
 * STITCH_ERROR_IO when the directory cannot be read. Nothing is stored on failure. */
STITCH_API stitch_status_t stitch_tune_fit(const char* const* keys, const char* const* values,
                                           size_t num_options, char* report, size_t capacity,
                                           size_t* needed);

/* ---------------------------------------------------------------------------------------------
 * Device memory
 *
 * For callers without an allocator of their own (C programs, the command line). Tensors passed to
 * stitch_program_run must live on the engine's device: kDLCUDA device 0 for "cuda", kDLROCM
 * device 0 for "hip", host memory (kDLCPU) for "cpu" and "reference". On the host backends these
 * functions use ordinary host memory, so one program text works on every backend.
 * ------------------------------------------------------------------------------------------- */

/* The DLPack device of the engine's tensors. */
STITCH_API stitch_status_t stitch_engine_device(stitch_engine_t engine, DLDevice* out);

/* Allocates `bytes` (256-byte aligned) on the engine's device; free with stitch_engine_free.
 * More than the machine's memory (host backends) or than the device can give fails with
 * STITCH_ERROR_OUT_OF_MEMORY and leaves *out unchanged. */
STITCH_API stitch_status_t stitch_engine_alloc(stitch_engine_t engine, size_t bytes, void** out);

/* Frees memory from stitch_engine_alloc. NULL is a no-op. */
STITCH_API void stitch_engine_free(stitch_engine_t engine, void* ptr);

typedef enum {
  STITCH_COPY_HOST_TO_DEVICE = 0,
  STITCH_COPY_DEVICE_TO_HOST = 1,
  STITCH_COPY_DEVICE_TO_DEVICE = 2
} stitch_copy_kind_t;

/* Copies `bytes` between host and device memory, ordered on `stream` (NULL: the default stream).
 * Host<->device copies are complete when the call returns. */
STITCH_API stitch_status_t stitch_engine_copy(stitch_engine_t engine, void* dst, const void* src,
                                              size_t bytes, stitch_copy_kind_t kind, void* stream);

/* Waits until all work queued on `stream` (NULL: the default stream) is done. A no-op on the
 * host backends, whose runs are complete when stitch_program_run returns. */
STITCH_API stitch_status_t stitch_engine_synchronize(stitch_engine_t engine, void* stream);

/* ---------------------------------------------------------------------------------------------
 * Code generation without running
 * ------------------------------------------------------------------------------------------- */

/* Plans `graph` for concrete sizes (as stitch_graph_explain_plan does), emits every kernel for a
 * target and compiles it, without running anything: no device is needed. Options:
 *   "target": sm_90 (default) | sm_80 | gfx90a | host   (sm_XY with XY >= 70 is also accepted)
 *             sm_* compile with NVRTC to cubin, gfx90a with hipRTC to a code object, host with
 *             LLVM ORC to x86-64 for this machine;
 *   "fusion": stitch | basic | off   (default: $STITCH_FUSION, else stitch)
 *   "plan_candidate": as for stitch_graph_explain_plan (default 0, the planner's pick)
 *   "emit":   report (default): one line per kernel (phases, block size, compile time: wall
 *             and the compiling thread's CPU time, registers, spilled bytes, binary size);
 *             source: the generated CUDA/HIP C++ (or LLVM IR for host) of every kernel.
 * A kernel that fails to compile fails the call with STITCH_ERROR_COMPILE; its message carries
 * the compiler log and the generated source. A compiler library that cannot be loaded (NVRTC,
 * hipRTC; LLVM in a build without it) is STITCH_ERROR_BACKEND_UNAVAILABLE. Output as by
 * stitch_graph_print. */
STITCH_API stitch_status_t stitch_graph_codegen(stitch_graph_t graph, const char* const* keys,
                                                const char* const* values, size_t num_options,
                                                const char* const* symbols, const int64_t* sizes,
                                                size_t num_symbols, char* buf, size_t capacity,
                                                size_t* needed);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STITCH_STITCH_H */
