/* lathe.h — Lathe's stable C API (liblathe.so): load, build, rewrite, compile and run
 * tensor graphs from any language.
 *
 * Conventions
 *   - Every call that can fail returns a lathe_status; LATHE_OK is 0. On failure
 *     lathe_last_error() returns the message (thread-local, valid until the thread's next
 *     failing call), the same text the `lathe` command prints.
 *   - Handles are opaque pointers. Each lathe_X_create / lathe_X_load / a call that returns
 *     a handle through an out-parameter gives the caller one reference that it releases
 *     with lathe_X_destroy (NULL is accepted). Handles never share mutable state that the
 *     caller can see: a graph is immutable; destroying a graph does not invalidate the
 *     tensors, sessions or programs made from it.
 *   - Strings returned through `char** out` are the caller's: free them with
 *     lathe_string_free. `const char*` results are owned by the handle they came from and
 *     live as long as it does.
 *   - Indices (kernels, outputs, steps) are 0-based here (the Lua API's are 1-based).
 *   - No C++ type or exception crosses this header.
 *   - Threads: calls on different handles may run concurrently, except that everything
 *     that runs Lua (lathe_call, .lua files, rules, rewrite sessions) is serialized on one
 *     process-wide Lua state. lathe_program_run never touches Lua.
 */
#ifndef LATHE_LATHE_H
#define LATHE_LATHE_H

#include <stddef.h>
#include <stdint.h>

#define LATHE_API_VERSION 1 /* bumped on any incompatible change of this header */

#if defined(__GNUC__)
#define LATHE_API __attribute__((visibility("default")))
#else
#define LATHE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status, errors, version */
typedef enum lathe_status {
  LATHE_OK = 0,
  LATHE_ERROR = 1,            /* user error: bad file, ill-typed graph, failing check, … */
  LATHE_INVALID_ARGUMENT = 2, /* NULL handle, index out of range, a buffer that does not fit */
  LATHE_INTERNAL = 3          /* an invariant failed inside Lathe (a bug; please report) */
} lathe_status;

LATHE_API int lathe_api_version(void);        /* LATHE_API_VERSION of the library */
LATHE_API const char* lathe_version(void);    /* "0.1.0" */
LATHE_API const char* lathe_last_error(void); /* "" when this thread has had no error */
LATHE_API void lathe_string_free(char* s);
/* `lathe help TOPIC`'s text for a Lua API topic ("lathe.compile", "Tensor:matmul",
 * "matmul", "Session:step"): "signature\n  doc". LATHE_ERROR when unknown. */
LATHE_API lathe_status lathe_help(const char* topic, char** out);
/* Every help topic, one per line. */
LATHE_API lathe_status lathe_help_topics(char** out);

/* ---------------------------------------------------------------- handles */
typedef struct lathe_graph_s* lathe_graph;     /* an immutable graph with named outputs */
typedef struct lathe_tensor_s* lathe_tensor;   /* a lazy tensor expression (a graph node) */
typedef struct lathe_rules_s* lathe_rules;     /* a rule set */
typedef struct lathe_rewrite_s* lathe_rewrite; /* a rewrite session */
typedef struct lathe_program_s* lathe_program; /* a compiled program */

/* ---------------------------------------------------------------- buffers (DLPack) */
/* Laid out exactly as DLPack's DLTensor (dlpack.h v0.6+): a DLTensor* may be passed as a
 * lathe_dltensor*. Only host memory (device_type 1 = kDLCPU) and dense row-major tensors
 * (strides NULL or the compact row-major strides) are accepted. */
typedef struct lathe_dltensor {
  void* data;
  struct { int32_t device_type; int32_t device_id; } device;
  int32_t ndim;
  struct { uint8_t code; uint8_t bits; uint16_t lanes; } dtype; /* code: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool */
  int64_t* shape;
  int64_t* strides; /* in elements; NULL = row-major */
  uint64_t byte_offset;
} lathe_dltensor;

/* A named buffer: a graph input or output. name NULL = by position (graph order). */
typedef struct lathe_arg {
  const char* name;
  lathe_dltensor tensor;
} lathe_arg;

/* ---------------------------------------------------------------- values for lathe_call */
typedef enum lathe_value_kind {
  LATHE_NIL = 0,
  LATHE_TENSOR = 1,
  LATHE_INT = 2,
  LATHE_FLOAT = 3,
  LATHE_BOOL = 4,
  LATHE_STRING = 5,
  LATHE_LIST = 6  /* items: ints (a shape, axes), strings (symbolic dims), tensors (cat) */
} lathe_value_kind;

typedef struct lathe_value {
  int32_t kind;    /* lathe_value_kind */
  const char* key; /* NULL: a positional argument; else a field of one trailing options
                      table ({approximate = "tanh"}, {keepdim = true}) */
  union {
    lathe_tensor tensor;
    int64_t i;   /* LATHE_INT, LATHE_BOOL */
    double f;
    const char* s;
    struct { const struct lathe_value* items; size_t n; } list;
  } u;
} lathe_value;

/* ---------------------------------------------------------------- tensor frontend */
/* Calls a composite by its Lua name with Lua's argument conventions: a Tensor method
 * ("matmul", "softmax", "conv2d", "add", "reshape", …; the first argument is the tensor)
 * or a lathe.* function ("input", "const", "arange", "cat", "where", …). The same table as
 * the Lua API, so every composite it has is reachable with no per-op code here.
 * `lathe help lua` lists them. Results are tensors (several for split/chunk): up to
 * `capacity` go to results[], *count says how many there were. */
LATHE_API lathe_status lathe_call(const char* name, const lathe_value* args, size_t nargs, lathe_tensor* results,
                                  size_t capacity, size_t* count);
/* The names lathe_call accepts, one per line: "method NAME" or "function NAME". */
LATHE_API lathe_status lathe_call_names(char** out);
/* A constant tensor holding a copy of a host buffer. */
LATHE_API lathe_status lathe_tensor_from_buffer(const lathe_dltensor* data, lathe_tensor* out);
LATHE_API lathe_tensor lathe_tensor_retain(lathe_tensor t); /* another reference */
LATHE_API void lathe_tensor_destroy(lathe_tensor t);

typedef struct lathe_tensor_info {
  uint32_t id;       /* node id */
  const char* op;    /* "Add", "Input", … (static) */
  const char* dtype; /* "f32", … (static) */
  int32_t ndim;
  const char* name;  /* Input / Extern name, else "" (owned by the tensor) */
} lathe_tensor_info;
LATHE_API lathe_status lathe_tensor_describe(lathe_tensor t, lathe_tensor_info* out);
/* Dimension i: *value is its size, or -1 when symbolic; *expr (may be NULL) gets its
 * text ("B", "B*4", "784"), owned by the tensor. */
LATHE_API lathe_status lathe_tensor_dim(lathe_tensor t, int32_t i, int64_t* value, const char** expr);
/* "Tensor f32[B, 10] (%12 Add)", as Lua's tostring. */
LATHE_API lathe_status lathe_tensor_text(lathe_tensor t, char** out);

/* ---------------------------------------------------------------- graphs */
/* By extension: .lathe (text IR), .lua (a script returning lathe.graph{…}), .onnx. */
LATHE_API lathe_status lathe_graph_load(const char* path, lathe_graph* out);
LATHE_API lathe_status lathe_graph_parse(const char* lathe_text, const char* filename, lathe_graph* out);
LATHE_API lathe_status lathe_graph_save(lathe_graph g, const char* path); /* .lathe text */
/* Outputs in the order given (names must be distinct). */
LATHE_API lathe_status lathe_graph_create(const char* const* names, const lathe_tensor* outputs, size_t n,
                                          lathe_graph* out);
LATHE_API void lathe_graph_destroy(lathe_graph g);
LATHE_API lathe_status lathe_graph_size(lathe_graph g, size_t* nodes); /* node count */
LATHE_API lathe_status lathe_graph_text(lathe_graph g, char** out);    /* .lathe text */
LATHE_API lathe_status lathe_graph_summary(lathe_graph g, char** out);
LATHE_API lathe_status lathe_graph_dot(lathe_graph g, char** out);     /* Graphviz DOT */
LATHE_API lathe_status lathe_graph_num_inputs(lathe_graph g, size_t* n);
LATHE_API lathe_status lathe_graph_num_outputs(lathe_graph g, size_t* n);
LATHE_API lathe_status lathe_graph_input(lathe_graph g, size_t i, lathe_tensor* out);
/* Output i as a tensor; *name (may be NULL) is owned by the graph. */
LATHE_API lathe_status lathe_graph_output(lathe_graph g, size_t i, const char** name, lathe_tensor* out);

/* ---------------------------------------------------------------- rules and rewriting */
LATHE_API lathe_status lathe_rules_builtin(const char* name, lathe_rules* out); /* assets/rules/NAME.lua */
LATHE_API lathe_status lathe_rules_load(const char* path, lathe_rules* out);    /* a rule file */
/* Rules written in Lua's rule DSL; the chunk returns a ruleset or a table of rules. */
LATHE_API lathe_status lathe_rules_parse(const char* lua_source, const char* chunkname, lathe_rules* out);
LATHE_API lathe_status lathe_rules_builtin_names(char** out); /* one per line */
LATHE_API lathe_status lathe_rules_count(lathe_rules r, size_t* n);
LATHE_API void lathe_rules_destroy(lathe_rules r);

/* A session applying nrules rule sets (in the order given); opts (keyed lathe_values):
 * check (bool), max_steps (int), seed (int), batch (bool). */
LATHE_API lathe_status lathe_rewrite_create(lathe_graph g, const lathe_rules* rules, size_t nrules, const lathe_value* opts,
                                            size_t nopts, lathe_rewrite* out);
LATHE_API void lathe_rewrite_destroy(lathe_rewrite s);
/* Up to n single rewrites; *applied (may be NULL) = how many (fewer at a fixpoint). */
LATHE_API lathe_status lathe_rewrite_step(lathe_rewrite s, int32_t n, int32_t* applied);
LATHE_API lathe_status lathe_rewrite_back(lathe_rewrite s, int32_t n);
LATHE_API lathe_status lathe_rewrite_seek(lathe_rewrite s, int32_t step); /* 0 = the original graph */
/* To a fixpoint or a breakpoint; *steps (may be NULL) = history entries added. */
LATHE_API lathe_status lathe_rewrite_run(lathe_rewrite s, int32_t* steps);
LATHE_API lathe_status lathe_rewrite_position(lathe_rewrite s, int32_t* current, int32_t* last);
/* The graph at step k (-1: the current one). */
LATHE_API lathe_status lathe_rewrite_graph(lathe_rewrite s, int32_t step, lathe_graph* out);
/* Nodes added / removed / changed from step a to step b ("+%15 Add f32[4]" lines). */
LATHE_API lathe_status lathe_rewrite_diff(lathe_rewrite s, int32_t a, int32_t b, char** out);
/* Interprets step 0 and the current step on seeded random inputs; on a difference
 * *ok = 0 and *message (may be NULL) names the first step and rule that changed it. */
LATHE_API lathe_status lathe_rewrite_check(lathe_rewrite s, int32_t* ok, char** message);
LATHE_API lathe_status lathe_rewrite_history(lathe_rewrite s, char** out); /* one line per step */
LATHE_API lathe_status lathe_rewrite_stats(lathe_rewrite s, char** out);   /* per-rule table */
LATHE_API lathe_status lathe_rewrite_breakpoint(lathe_rewrite s, const char* rule, int32_t on);

/* ---------------------------------------------------------------- compile and run */
/* opts (keyed lathe_values): backend (string: "llvm" default when built, "c", "cuda",
 * "interp"), cache (bool, the on-disk kernel cache, default true), flags (string: extra
 * compiler flags, c backend), schedule (bool: false = plain loops, default true). */
LATHE_API lathe_status lathe_compile(lathe_graph g, const lathe_value* opts, size_t nopts, lathe_program* out);
LATHE_API void lathe_program_destroy(lathe_program p);
LATHE_API const char* lathe_program_backend(lathe_program p);
LATHE_API lathe_status lathe_program_graph(lathe_program p, lathe_graph* out);
LATHE_API lathe_status lathe_program_num_kernels(lathe_program p, int32_t* n);

typedef struct lathe_kernel_info {
  const char* name; /* "k0_softmax" (owned by the program) */
  const char* kind; /* "elementwise", "reduce", "matmul", … */
  int32_t nodes;    /* primitive nodes fused into it */
} lathe_kernel_info;
LATHE_API lathe_status lathe_program_kernel(lathe_program p, int32_t k, lathe_kernel_info* out);
LATHE_API lathe_status lathe_program_loop(lathe_program p, int32_t k, char** out);   /* loop IR */
LATHE_API lathe_status lathe_program_source(lathe_program p, int32_t k, char** out); /* C / LLVM IR / CUDA C */
LATHE_API lathe_status lathe_program_asm(lathe_program p, int32_t k, char** out);    /* assembly / PTX */

/* The shape output `out_index` gets for these inputs (symbolic dims bound from them). */
LATHE_API lathe_status lathe_program_output_shape(lathe_program p, const lathe_arg* inputs, size_t ninputs,
                                                  size_t out_index, int64_t* shape, int32_t capacity, int32_t* ndim);
/* Runs with caller-owned buffers: kernels read the inputs in place and write the outputs in
 * place (no copies for dense host tensors). Every graph input must be given; outputs are
 * matched by name (or position) and must have the dtype and shape the program computes.
 * Outputs not asked for are computed into scratch memory. Safe to call from several threads
 * (runs of one program are serialized). */
LATHE_API lathe_status lathe_program_run(lathe_program p, const lathe_arg* inputs, size_t ninputs, const lathe_arg* outputs,
                                         size_t noutputs);

typedef struct lathe_kernel_profile {
  const char* name; /* owned by the program until its next profile */
  const char* kind;
  const char* bound; /* "compute" or "memory" */
  int32_t nodes, calls;
  double ms, min_ms; /* median and minimum per call */
  double flops, bytes, gflops, gbps;
  double roof;       /* share of the machine ceiling (0..1) */
} lathe_kernel_profile;
/* Times every kernel over `iters` runs (inputs not given: seeded random data); *total_ms
 * (may be NULL) = median whole-program time, *rows (may be NULL) = the profile's rows
 * (one per kernel; one for a backend that runs the graph whole). Then
 * lathe_program_profile_kernel(p, row). */
LATHE_API lathe_status lathe_program_profile(lathe_program p, const lathe_arg* inputs, size_t ninputs, int32_t iters,
                                             double* total_ms, int32_t* rows);
LATHE_API lathe_status lathe_program_profile_kernel(lathe_program p, int32_t k, lathe_kernel_profile* out);
LATHE_API lathe_status lathe_program_profile_text(lathe_program p, char** out); /* the table */
LATHE_API lathe_status lathe_program_trace(lathe_program p, const char* path); /* Chrome trace JSON */

#ifdef __cplusplus
}
#endif
#endif /* LATHE_LATHE_H */
