// capi_test.cpp — the C API (include/lathe/lathe.h) as a C caller sees it: status codes,
// thread-local messages, NULL handles, lathe_call's argument conventions, zero-copy runs
// into caller buffers (symbolic dims rebound per call), the interp whole-graph path,
// rewrite sessions and profiles.
#include <lathe/lathe.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

namespace {

lathe_value S(const char* s, const char* key = nullptr) { lathe_value v{LATHE_STRING, key, {}}; v.u.s = s; return v; }
lathe_value I(int64_t i, const char* key = nullptr) { lathe_value v{LATHE_INT, key, {}}; v.u.i = i; return v; }
lathe_value F(double f) { lathe_value v{LATHE_FLOAT, nullptr, {}}; v.u.f = f; return v; }
lathe_value T(lathe_tensor t) { lathe_value v{LATHE_TENSOR, nullptr, {}}; v.u.tensor = t; return v; }
lathe_value L(const lathe_value* items, size_t n) { lathe_value v{LATHE_LIST, nullptr, {}}; v.u.list.items = items; v.u.list.n = n; return v; }

lathe_tensor call1(const char* name, std::vector<lathe_value> args) {
  lathe_tensor t = nullptr;
  size_t n = 0;
  EXPECT_EQ(lathe_call(name, args.data(), args.size(), &t, 1, &n), LATHE_OK) << lathe_last_error();
  EXPECT_EQ(n, 1u);
  return t;
}

lathe_dltensor f32(float* p, int32_t ndim, int64_t* shape) {
  lathe_dltensor t{};
  t.data = p;
  t.device.device_type = 1;
  t.ndim = ndim;
  t.dtype.code = 2;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

std::string take(char* s) {
  std::string r = s ? s : "";
  lathe_string_free(s);
  return r;
}

// y = exp(x) * 2 over x: f32[B, 3]
lathe_graph exp_graph() {
  lathe_value dims[2] = {S("B"), I(3)};
  lathe_tensor x = call1("input", {S("x"), L(dims, 2)});
  lathe_tensor e = call1("exp", {T(x)});
  lathe_tensor y = call1("mul", {T(e), F(2.0)});
  const char* names[1] = {"y"};
  lathe_graph g = nullptr;
  EXPECT_EQ(lathe_graph_create(names, &y, 1, &g), LATHE_OK) << lathe_last_error();
  for (lathe_tensor t : {x, e, y}) lathe_tensor_destroy(t);
  return g;
}

TEST(CApi, VersionAndHelp) {
  EXPECT_EQ(lathe_api_version(), LATHE_API_VERSION);
  EXPECT_STREQ(lathe_version(), "0.1.0");
  char* h = nullptr;
  ASSERT_EQ(lathe_help("lathe.compile", &h), LATHE_OK);
  EXPECT_NE(take(h).find("compile to kernels"), std::string::npos);
  EXPECT_EQ(lathe_help("no-such-topic", &h), LATHE_ERROR);
  EXPECT_NE(std::string(lathe_last_error()).find("no help topic"), std::string::npos);
}

TEST(CApi, NullHandlesAreInvalidArguments) {
  size_t n;
  EXPECT_EQ(lathe_graph_size(nullptr, &n), LATHE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lathe_last_error()).find("graph is NULL"), std::string::npos);
  EXPECT_EQ(lathe_program_run(nullptr, nullptr, 0, nullptr, 0), LATHE_INVALID_ARGUMENT);
  EXPECT_EQ(lathe_graph_load(nullptr, nullptr), LATHE_INVALID_ARGUMENT);
  lathe_graph_destroy(nullptr);
  lathe_tensor_destroy(nullptr);
  lathe_program_destroy(nullptr);
}

TEST(CApi, LastErrorIsPerThread) {
  lathe_graph g;
  ASSERT_EQ(lathe_graph_load("/nonexistent/a.lathe", &g), LATHE_ERROR);
  std::string mine = lathe_last_error();
  std::string other;
  std::thread t([&] {
    other = lathe_last_error();  // nothing failed on this thread
    lathe_graph g2;
    EXPECT_EQ(lathe_graph_parse("graph {", "bad.lathe", &g2), LATHE_ERROR);
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(std::string(lathe_last_error()), mine);
  EXPECT_NE(mine.find("/nonexistent/a.lathe"), std::string::npos);
}

TEST(CApi, CallReportsUnknownNamesAndBadArguments) {
  lathe_tensor t;
  size_t n;
  lathe_value none[1] = {I(1)};
  EXPECT_EQ(lathe_call("frobnicate", none, 1, &t, 1, &n), LATHE_ERROR);
  EXPECT_NE(std::string(lathe_last_error()).find("no composite or function 'frobnicate'"), std::string::npos);
  lathe_value dims[1] = {I(4)};
  lathe_tensor x = call1("input", {S("x"), L(dims, 1)});
  lathe_value args[2] = {T(x), S("not a dim")};
  EXPECT_EQ(lathe_call("softmax", args, 2, &t, 1, &n), LATHE_ERROR);
  // a keyword that names a positional parameter goes in its place; others form the options table
  lathe_value d2[2] = {I(2), I(4)};
  lathe_tensor x2 = call1("input", {S("x2"), L(d2, 2)});
  lathe_value kw[3] = {T(x2), I(1, "axis"), {LATHE_BOOL, "keepdim", {}}};
  kw[2].u.i = 1;
  lathe_tensor s = nullptr;
  ASSERT_EQ(lathe_call("sum", kw, 3, &s, 1, &n), LATHE_OK) << lathe_last_error();
  lathe_tensor_info info;
  ASSERT_EQ(lathe_tensor_describe(s, &info), LATHE_OK);
  EXPECT_EQ(info.ndim, 2);
  int64_t v;
  ASSERT_EQ(lathe_tensor_dim(s, 1, &v, nullptr), LATHE_OK);
  EXPECT_EQ(v, 1);
  // split returns several tensors; count says how many even past capacity
  lathe_tensor parts[1];
  lathe_value sp[3] = {T(x2), I(1), I(1)};
  ASSERT_EQ(lathe_call("split", sp, 3, parts, 1, &n), LATHE_OK) << lathe_last_error();
  EXPECT_EQ(n, 4u);
  for (lathe_tensor t2 : {x, x2, s, parts[0]}) lathe_tensor_destroy(t2);
}

TEST(CApi, RunsZeroCopyIntoCallerBuffersAndRebindsDims) {
  lathe_graph g = exp_graph();
  for (const char* backend : {"c", "llvm", "interp"}) {
    lathe_value opt = S(backend, "backend");
    lathe_program p;
    ASSERT_EQ(lathe_compile(g, &opt, 1, &p), LATHE_OK) << lathe_last_error();
    EXPECT_STREQ(lathe_program_backend(p), backend);
    for (int64_t b : {1, 64, 7}) {
      std::vector<float> x(b * 3), y(b * 3, -1);
      for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * i - 0.5f;
      int64_t sx[2] = {b, 3}, sy[2] = {b, 3}, got[2];
      lathe_arg in{"x", f32(x.data(), 2, sx)};
      int32_t nd;
      ASSERT_EQ(lathe_program_output_shape(p, &in, 1, 0, got, 2, &nd), LATHE_OK) << lathe_last_error();
      EXPECT_EQ(nd, 2);
      EXPECT_EQ(got[0], b);
      lathe_arg out{"y", f32(y.data(), 2, sy)};
      ASSERT_EQ(lathe_program_run(p, &in, 1, &out, 1), LATHE_OK) << lathe_last_error();
      for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], 2 * std::exp(x[i]), 1e-5) << backend << " " << i;
      // by position too
      lathe_arg in_pos{nullptr, in.tensor}, out_pos{nullptr, out.tensor};
      ASSERT_EQ(lathe_program_run(p, &in_pos, 1, &out_pos, 1), LATHE_OK) << lathe_last_error();
    }
    // wrong output shape, wrong dtype, missing input: errors naming the buffer
    float x[6] = {0}, y[4];
    int64_t sx[2] = {2, 3}, sy[2] = {2, 2};
    lathe_arg in{"x", f32(x, 2, sx)}, out{"y", f32(y, 2, sy)};
    EXPECT_EQ(lathe_program_run(p, &in, 1, &out, 1), LATHE_ERROR);
    EXPECT_NE(std::string(lathe_last_error()).find("output 'y' is f32[2, 2], the program computes f32[2, 3]"), std::string::npos)
        << lathe_last_error();
    EXPECT_EQ(lathe_program_run(p, nullptr, 0, nullptr, 0), LATHE_ERROR);
    EXPECT_NE(std::string(lathe_last_error()).find("missing input 'x'"), std::string::npos);
    in.tensor.dtype.bits = 64;
    EXPECT_EQ(lathe_program_run(p, &in, 1, nullptr, 0), LATHE_ERROR);
    EXPECT_NE(std::string(lathe_last_error()).find("dtype f64"), std::string::npos) << lathe_last_error();
    int64_t strides[2] = {1, 2};
    in.tensor.dtype.bits = 32;
    in.tensor.strides = strides;
    EXPECT_EQ(lathe_program_run(p, &in, 1, nullptr, 0), LATHE_ERROR);
    EXPECT_NE(std::string(lathe_last_error()).find("strided"), std::string::npos);
    lathe_program_destroy(p);
  }
  lathe_graph_destroy(g);
}

TEST(CApi, ProgramTextAndProfile) {
  lathe_graph g = exp_graph();
  lathe_value opt = S("llvm", "backend");
  lathe_program p;
  ASSERT_EQ(lathe_compile(g, &opt, 1, &p), LATHE_OK) << lathe_last_error();
  int32_t nk;
  ASSERT_EQ(lathe_program_num_kernels(p, &nk), LATHE_OK);
  ASSERT_GE(nk, 1);
  lathe_kernel_info k;
  ASSERT_EQ(lathe_program_kernel(p, 0, &k), LATHE_OK);
  EXPECT_STRNE(k.name, "");
  char* s;
  ASSERT_EQ(lathe_program_loop(p, 0, &s), LATHE_OK);
  EXPECT_NE(take(s).find("for "), std::string::npos);
  ASSERT_EQ(lathe_program_source(p, 0, &s), LATHE_OK);
  EXPECT_NE(take(s).find("define"), std::string::npos);
  ASSERT_EQ(lathe_program_asm(p, 0, &s), LATHE_OK);
  EXPECT_FALSE(take(s).empty());
  EXPECT_EQ(lathe_program_loop(p, nk, &s), LATHE_INVALID_ARGUMENT);
  EXPECT_EQ(lathe_program_profile_kernel(p, 0, nullptr), LATHE_ERROR);  // no profile yet
  double total;
  int32_t rows;
  EXPECT_EQ(lathe_program_profile(p, nullptr, 0, 3, &total, &rows), LATHE_ERROR);  // B unbound
  EXPECT_NE(std::string(lathe_last_error()).find("'B' is not bound"), std::string::npos) << lathe_last_error();
  float x[8 * 3] = {0};
  int64_t sx[2] = {8, 3};
  lathe_arg in{"x", f32(x, 2, sx)};
  ASSERT_EQ(lathe_program_profile(p, &in, 1, 3, &total, &rows), LATHE_OK) << lathe_last_error();
  EXPECT_EQ(rows, nk);
  lathe_kernel_profile kp;
  ASSERT_EQ(lathe_program_profile_kernel(p, 0, &kp), LATHE_OK);
  EXPECT_EQ(kp.calls, 3);
  EXPECT_GT(kp.flops, 0);
  ASSERT_EQ(lathe_program_profile_text(p, &s), LATHE_OK);
  EXPECT_NE(take(s).find("Kernel"), std::string::npos);
  lathe_value bad = S("x", "bogus");
  lathe_program p2;
  EXPECT_EQ(lathe_compile(g, &bad, 1, &p2), LATHE_ERROR);
  EXPECT_NE(std::string(lathe_last_error()).find("unknown option 'bogus'"), std::string::npos);
  lathe_program_destroy(p);
  lathe_graph_destroy(g);
}

TEST(CApi, RewriteSession) {
  lathe_value dims[1] = {I(4)};
  lathe_tensor x = call1("input", {S("x"), L(dims, 1)});
  lathe_tensor a = call1("mul", {T(x), F(1.0)});
  lathe_tensor b = call1("add", {T(a), F(0.0)});
  const char* names[1] = {"y"};
  lathe_graph g;
  ASSERT_EQ(lathe_graph_create(names, &b, 1, &g), LATHE_OK);
  lathe_rules r;
  ASSERT_EQ(lathe_rules_builtin("simplify", &r), LATHE_OK) << lathe_last_error();
  lathe_value chk{LATHE_BOOL, "check", {}};
  chk.u.i = 1;
  lathe_rewrite s;
  ASSERT_EQ(lathe_rewrite_create(g, &r, 1, &chk, 1, &s), LATHE_OK) << lathe_last_error();
  int32_t applied, cur, last;
  ASSERT_EQ(lathe_rewrite_step(s, 1, &applied), LATHE_OK);
  EXPECT_EQ(applied, 1);
  ASSERT_EQ(lathe_rewrite_run(s, &applied), LATHE_OK);
  ASSERT_EQ(lathe_rewrite_position(s, &cur, &last), LATHE_OK);
  EXPECT_EQ(cur, 2);
  EXPECT_EQ(last, 2);
  char* text;
  ASSERT_EQ(lathe_rewrite_diff(s, 0, 2, &text), LATHE_OK);
  EXPECT_NE(take(text).find("-%"), std::string::npos);
  ASSERT_EQ(lathe_rewrite_back(s, 2), LATHE_OK);
  EXPECT_EQ(lathe_rewrite_back(s, 1), LATHE_ERROR);
  ASSERT_EQ(lathe_rewrite_seek(s, 2), LATHE_OK);
  int32_t ok;
  ASSERT_EQ(lathe_rewrite_check(s, &ok, &text), LATHE_OK);
  EXPECT_EQ(ok, 1);
  take(text);
  lathe_graph g2;
  ASSERT_EQ(lathe_rewrite_graph(s, -1, &g2), LATHE_OK);
  size_t n1, n2;
  lathe_graph_size(g, &n1);
  lathe_graph_size(g2, &n2);
  EXPECT_LT(n2, n1);
  EXPECT_EQ(lathe_rewrite_graph(s, 9, &g2), LATHE_ERROR);
  lathe_rewrite_destroy(s);
  lathe_rules_destroy(r);
  lathe_graph_destroy(g2);
  lathe_graph_destroy(g);
  for (lathe_tensor t : {x, a, b}) lathe_tensor_destroy(t);
}

TEST(CApi, LoadsEveryFileKind) {
  for (const char* f : {"samples/01-mlp.lathe", "samples/01-mlp.lua"}) {
    lathe_graph g;
    ASSERT_EQ(lathe_graph_load((std::string(LATHE_SOURCE_DIR) + "/" + f).c_str(), &g), LATHE_OK) << lathe_last_error();
    size_t n;
    lathe_graph_num_outputs(g, &n);
    EXPECT_EQ(n, 1u);
    lathe_graph_destroy(g);
  }
  lathe_graph g;
  EXPECT_EQ(lathe_graph_load("x.unknownkind", &g), LATHE_ERROR);
  EXPECT_NE(std::string(lathe_last_error()).find(".onnx"), std::string::npos) << "the .onnx loader is registered";
}

}  // namespace
