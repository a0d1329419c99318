/* run_graph.c — Lathe from C, using only the installed header and library:
 *
 *   cc run_graph.c $(pkg-config --cflags --libs lathe) -o run_graph
 *   ./run_graph [GRAPH.lathe|.lua|.onnx] [BACKEND]
 *
 * With a file: loads it, compiles it, runs it on ones and prints each output's first
 * values. Without: builds y = softmax(relu(x @ w + 1)) through lathe_call, rewrites it
 * with the built-in "simplify" rules, compiles, runs on caller-owned buffers and checks
 * the result against a plain C computation (exit 1 on a mismatch). */
#include <lathe/lathe.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                        \
  do {                                                                     \
    if ((call) != LATHE_OK) {                                              \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, lathe_last_error()); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static lathe_value str_v(const char* s) { lathe_value v = {LATHE_STRING, NULL, {0}}; v.u.s = s; return v; }
static lathe_value int_v(int64_t i) { lathe_value v = {LATHE_INT, NULL, {0}}; v.u.i = i; return v; }
static lathe_value flt_v(double f) { lathe_value v = {LATHE_FLOAT, NULL, {0}}; v.u.f = f; return v; }
static lathe_value ten_v(lathe_tensor t) { lathe_value v = {LATHE_TENSOR, NULL, {0}}; v.u.tensor = t; return v; }

static lathe_tensor call(const char* name, lathe_value* args, size_t n) {
  lathe_tensor out = NULL;
  size_t count = 0;
  CHECK(lathe_call(name, args, n, &out, 1, &count));
  return out;
}

static lathe_dltensor f32_buffer(float* data, int32_t ndim, int64_t* shape) {
  lathe_dltensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = 1; /* kDLCPU */
  t.ndim = ndim;
  t.dtype.code = 2; /* float */
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

static int run_file(const char* path, const char* backend) {
  lathe_graph g;
  lathe_program p;
  CHECK(lathe_graph_load(path, &g));
  lathe_value opt = str_v(backend);
  opt.key = "backend";
  CHECK(lathe_compile(g, &opt, 1, &p));
  size_t nin = 0, nout = 0;
  CHECK(lathe_graph_num_inputs(g, &nin));
  CHECK(lathe_graph_num_outputs(g, &nout));
  lathe_arg* ins = calloc(nin ? nin : 1, sizeof *ins);
  int64_t(*shapes)[8] = calloc(nin ? nin : 1, sizeof *shapes);
  for (size_t i = 0; i < nin; ++i) {
    lathe_tensor t;
    lathe_tensor_info info;
    CHECK(lathe_graph_input(g, i, &t));
    CHECK(lathe_tensor_describe(t, &info));
    if (strcmp(info.dtype, "f32") != 0 || info.ndim > 8) {
      fprintf(stderr, "%s: input %s is %s; this sample feeds f32 only\n", path, info.name, info.dtype);
      return 1;
    }
    int64_t n = 1;
    for (int d = 0; d < info.ndim; ++d) {
      int64_t v;
      CHECK(lathe_tensor_dim(t, d, &v, NULL));
      shapes[i][d] = v < 0 ? 2 : v; /* symbolic dims: 2 */
      n *= shapes[i][d];
    }
    float* data = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t k = 0; k < n; ++k) data[k] = 1.0f;
    ins[i].name = info.name;  /* owned by t, which stays alive below */
    ins[i].tensor = f32_buffer(data, info.ndim, shapes[i]);
  }
  for (size_t o = 0; o < nout; ++o) {
    const char* name;
    int64_t shape[8];
    int32_t nd;
    CHECK(lathe_graph_output(g, o, &name, NULL));
    CHECK(lathe_program_output_shape(p, ins, nin, o, shape, 8, &nd));
    int64_t n = 1;
    for (int d = 0; d < nd; ++d) n *= shape[d];
    float* y = malloc((size_t)(n ? n : 1) * sizeof(float));
    lathe_arg out = {name, f32_buffer(y, nd, shape)};
    CHECK(lathe_program_run(p, ins, nin, &out, 1));
    printf("%s: %lld values:", name, (long long)n);
    for (int64_t k = 0; k < n && k < 4; ++k) printf(" %g", y[k]);
    printf("\n");
    free(y);
  }
  lathe_program_destroy(p);
  lathe_graph_destroy(g);
  return 0;
}

int main(int argc, char** argv) {
  printf("lathe %s (C API %d)\n", lathe_version(), lathe_api_version());
  if (lathe_api_version() != LATHE_API_VERSION) return 1;
  const char* backend = argc > 2 ? argv[2] : "llvm";
  if (argc > 1) return run_file(argv[1], backend);

  /* y = softmax(relu(x @ w + 1), -1), x: f32[B, 3], w: f32[3, 2] */
  lathe_value dims_x[2] = {str_v("B"), int_v(3)}, dims_w[2] = {int_v(3), int_v(2)};
  lathe_value a_x[3] = {str_v("x"), {LATHE_LIST, NULL, {0}}, str_v("f32")};
  a_x[1].u.list.items = dims_x;
  a_x[1].u.list.n = 2;
  lathe_value a_w[3] = {str_v("w"), {LATHE_LIST, NULL, {0}}, str_v("f32")};
  a_w[1].u.list.items = dims_w;
  a_w[1].u.list.n = 2;
  lathe_tensor x = call("input", a_x, 3), w = call("input", a_w, 3);
  lathe_value mm[2] = {ten_v(x), ten_v(w)};
  lathe_tensor xw = call("matmul", mm, 2);
  lathe_value add[2] = {ten_v(xw), flt_v(1.0)};
  lathe_tensor s = call("add", add, 2);
  lathe_value rl[1] = {ten_v(s)};
  lathe_tensor r = call("relu", rl, 1);
  lathe_value sm[2] = {ten_v(r), int_v(-1)};
  lathe_tensor y = call("softmax", sm, 2);

  const char* names[1] = {"y"};
  lathe_graph g, g2;
  CHECK(lathe_graph_create(names, &y, 1, &g));
  size_t nodes;
  CHECK(lathe_graph_size(g, &nodes));

  lathe_rules rules;
  lathe_rewrite rw;
  lathe_value chk = {LATHE_BOOL, "check", {0}};
  chk.u.i = 1;
  CHECK(lathe_rules_builtin("simplify", &rules));
  CHECK(lathe_rewrite_create(g, &rules, 1, &chk, 1, &rw));
  int32_t steps = 0;
  CHECK(lathe_rewrite_run(rw, &steps));
  CHECK(lathe_rewrite_graph(rw, -1, &g2));
  size_t nodes2;
  CHECK(lathe_graph_size(g2, &nodes2));
  printf("graph: %zu nodes, %zu after %d rewrite steps\n", nodes, nodes2, steps);

  lathe_value opt = str_v(backend);
  opt.key = "backend";
  lathe_program p;
  CHECK(lathe_compile(g2, &opt, 1, &p));
  int32_t nk;
  CHECK(lathe_program_num_kernels(p, &nk));

  enum { B = 5 };
  float xs[B * 3], ws[3 * 2], ys[B * 2];
  for (int i = 0; i < B * 3; ++i) xs[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
  for (int i = 0; i < 6; ++i) ws[i] = (float)((i * 5) % 7) / 3.0f - 1.0f;
  int64_t sx[2] = {B, 3}, sw[2] = {3, 2}, sy[2] = {B, 2};
  lathe_arg ins[2] = {{"x", f32_buffer(xs, 2, sx)}, {"w", f32_buffer(ws, 2, sw)}};
  lathe_arg outs[1] = {{"y", f32_buffer(ys, 2, sy)}};
  CHECK(lathe_program_run(p, ins, 2, outs, 1)); /* writes ys in place */

  double worst = 0;
  for (int b = 0; b < B; ++b) {
    double z[2], m = -1e30, sum = 0;
    for (int j = 0; j < 2; ++j) {
      z[j] = 1.0;
      for (int k = 0; k < 3; ++k) z[j] += xs[b * 3 + k] * ws[k * 2 + j];
      z[j] = z[j] > 0 ? z[j] : 0;
      m = z[j] > m ? z[j] : m;
    }
    for (int j = 0; j < 2; ++j) sum += exp(z[j] - m);
    for (int j = 0; j < 2; ++j) {
      double e = fabs(exp(z[j] - m) / sum - ys[b * 2 + j]);
      worst = e > worst ? e : worst;
    }
  }
  printf("%s: %d kernels, y[0] = %g %g, max error vs C %.2g\n", lathe_program_backend(p), nk, ys[0], ys[1], worst);

  /* errors come back as a status and a message */
  lathe_graph bad;
  if (lathe_graph_load("/nonexistent.lathe", &bad) == LATHE_OK) return 1;
  printf("expected error: %s\n", lathe_last_error());

  lathe_program_destroy(p);
  lathe_rewrite_destroy(rw);
  lathe_rules_destroy(rules);
  lathe_graph_destroy(g2);
  lathe_graph_destroy(g);
  lathe_tensor ts[7] = {x, w, xw, s, r, y, NULL};
  for (int i = 0; ts[i]; ++i) lathe_tensor_destroy(ts[i]);
  return worst < 1e-5 ? 0 : 1;
}
