// builtin_mirror.h — C++ mirrors of assets/rules/{simplify,fold,views,blas}.lua, so the
// engine is tested on exactly the rules the Lua files state (the Lua layer's own tests
// load the files themselves). Keep the two in step: same names, patterns and conditions.
#pragma once
#include <cmath>

#include "core/ir/build.h"
#include "core/rewrite/rewriter.h"
#include "core/rewrite/rule.h"

namespace lathe::test {

inline bool not_float(const Match& m) { return !is_float(m.dtype()); }

inline Ruleset simplify_rules() {
  return Ruleset("simplify", {
      make_rule("add-zero", "Add(x, 0)", "x"),
      make_rule("mul-one", "Mul(x, 1)", "x"),
      make_rule("mul-zero", "Mul(x, 0)", "0", {not_float}),
      make_rule("add-neg-self", "Add(x, Neg(x))", "0", {not_float}),
      make_rule("neg-neg", "Neg(Neg(x))", "x"),
      make_rule("recip-recip", "Recip(Recip(x))", "x", {[](const Match& m) { return m.node("x")->dtype != DType::F16; }}),
      make_rule("max-self", "Max(x, x)", "x"),
      make_rule("and-self", "And(x, x)", "x"),
      make_rule("or-self", "Or(x, x)", "x"),
      make_rule("xor-self", "Xor(x, x)", "0"),
      make_rule("where-same", "Where(c, x, x)", "x"),
      make_rule("where-true", "Where(1, x, y)", "x"),
      make_rule("where-false", "Where(0, x, y)", "y"),
      make_rule("idiv-one", "IDiv(x, 1)", "x"),
      make_rule("copy-copy", "Copy(Copy(x))", "Copy(x)"),
  });
}

// Like lathe.const: floats round to the dtype, integers wrap (as the integer ops do).
inline NodeRef const_like(double v, DType dt) {
  return is_float(dt) ? prim::constant(v, dt) : prim::constant_int(static_cast<int64_t>(v), dt);
}

inline ReplaceFn fold2(double (*f)(double, double)) {
  return [f](const Match& m) { return const_like(f(*m.value("a"), *m.value("b")), m.dtype()); };
}

inline Ruleset fold_rules() {
  return Ruleset("fold", {
      make_rule("fold-add", "Add(Const(a), Const(b))", fold2([](double a, double b) { return a + b; })),
      make_rule("fold-mul", "Mul(Const(a), Const(b))", fold2([](double a, double b) { return a * b; })),
      make_rule("fold-max", "Max(Const(a), Const(b))",
                fold2([](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); })),
      make_rule("fold-idiv", "IDiv(Const(a), Const(b))", fold2([](double a, double b) { return b == 0 ? 0.0 : std::trunc(a / b); }),
                {not_float}),
      make_rule("fold-mod", "Mod(Const(a), Const(b))", fold2([](double a, double b) { return b == 0 ? 0.0 : std::fmod(a, b); })),
      make_rule("fold-cmplt", "CmpLT(Const(a), Const(b))",
                [](const Match& m) { return prim::constant(*m.value("a") < *m.value("b") ? 1 : 0, DType::Bool); }),
      make_rule("fold-cmpne", "CmpNE(Const(a), Const(b))",
                [](const Match& m) { return prim::constant(*m.value("a") != *m.value("b") ? 1 : 0, DType::Bool); }),
      make_rule("fold-neg", "Neg(Const(a))", [](const Match& m) { return const_like(-*m.value("a"), m.dtype()); }),
      make_rule("fold-recip", "Recip(Const(a))", [](const Match& m) { return prim::constant(1 / *m.value("a"), m.dtype()); }),
      make_rule("fold-sqrt", "Sqrt(Const(a))", [](const Match& m) { return prim::constant(std::sqrt(*m.value("a")), m.dtype()); }),
  });
}

inline Ruleset views_rules() {
  return Ruleset("views", {
      make_rule("view-view", "View(View(x))", [](const Match& m) { return rebuild_node(m.root, {m.root->inputs[0]}); }),
      make_rule("view-identity", "View(x)", [](const Match& m) { return rebuild_node(m.root, {m.node("x")}); }),
  });
}

// blas.lua's matmul-to-sgemm, step for step.
inline NodeRef blas_operand(NodeRef v, int64_t M, int64_t N, int64_t K, char* kind, int64_t* trans) {
  if (v->op != Op::View) return nullptr;
  const ViewSpec& vw = *v->attrs.view;
  if (vw.offset != SymInt(0) || vw.has_mask()) return nullptr;
  for (auto& s : vw.strides) if (!s.is_const()) return nullptr;
  int64_t s0 = vw.strides[0].value(), s1 = vw.strides[1].value(), s2 = vw.strides[2].value();
  NodeRef src = v->inputs[0];
  SymInt numel = shape_numel(src->shape);
  if (!numel.is_const()) return nullptr;
  if (s1 == 0 && numel.value() == M * K) {
    *kind = 'A';
    if (s0 == K && s2 == 1) { *trans = 0; return src; }
    if (s0 == 1 && s2 == M) { *trans = 1; return src; }
  } else if (s0 == 0 && numel.value() == K * N) {
    *kind = 'B';
    if (s1 == 1 && s2 == N) { *trans = 0; return src; }
    if (s1 == K && s2 == 1) { *trans = 1; return src; }
  }
  return nullptr;
}

inline Ruleset blas_rules() {
  return Ruleset("blas", {make_rule("matmul-to-sgemm", "Reduce{op=\"add\", axes=[2]}(Mul(p, q))", [](const Match& m) -> NodeRef {
    NodeRef p = m.node("p"), q = m.node("q");
    if (m.dtype() != DType::F32 || p->shape.size() != 3 || !shape_is_const(p->shape)) return nullptr;
    auto sh = shape_values(p->shape);
    int64_t M = sh[0], N = sh[1], K = sh[2];
    char ka = 0, kb = 0;
    int64_t ta = 0, tb = 0;
    NodeRef sa = blas_operand(p, M, N, K, &ka, &ta), sb = blas_operand(q, M, N, K, &kb, &tb);
    if (ka == 'B' && kb == 'A') { std::swap(sa, sb); std::swap(ta, tb); std::swap(ka, kb); }
    if (!sa || !sb || ka != 'A' || kb != 'B') return nullptr;
    NodeRef c = prim::extern_call("sgemm", {sa, sb}, DType::F32, {M, N}, {M, N, K, ta, tb});
    return prim::view(c, *view_reshape(ViewSpec::contiguous(c->shape), {M, N, 1}));
  })});
}

}  // namespace lathe::test
