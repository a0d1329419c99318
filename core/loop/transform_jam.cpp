// transform_jam.cpp — jam (row blocking: unroll and jam of an output loop). See transform.h.
#include <set>

#include "core/ir/diag.h"
#include "core/loop/transform_jam.h"
#include "core/loop/transform_detail.h"

namespace lathe::loop {

namespace {

using detail::refuse;

ExprRef rename_expr(const ExprRef& e, const std::string& from, const std::string& to) {
  if (!e) return e;
  if (e->kind == ExprKind::Var) return e->name == from ? var(to, e->dtype, e->lanes) : e;
  if (!mentions(e, from)) return e;
  std::vector<ExprRef> args;
  for (auto& a : e->args) args.push_back(rename_expr(a, from, to));
  return with_args(e, std::move(args));
}

// renames local `from` to `to` in body: its declaration, assignments, uses (their types
// kept), reductions
void rename_local(std::vector<Stmt>& body, const std::string& from, const std::string& to) {
  walk(body, [&](Stmt& s) {
    for (ExprRef* e : {&s.extent, &s.cond, &s.index, &s.value}) *e = rename_expr(*e, from, to);
    if ((s.kind == StmtKind::Let || s.kind == StmtKind::Assign) && s.var == from) s.var = to;
    for (auto& r : s.reduces)
      if (r == from) r = to;
    return true;
  });
}

}  // namespace

void jam(LoopFunc& f, std::string name, int factor) {
  std::string how = name + " by " + std::to_string(factor);
  if (factor < 2 || factor > 8) refuse("jam", how, "the factor must be from 2 to 8");
  detail::Found fd = detail::must_find(f, "jam", name);
  Stmt& loop = *fd.get();
  if (!loop.reduces.empty()) refuse("jam", how, "axis " + name + " carries a reduction into " + loop.reduces[0]);
  if (!is_const(loop.extent) || loop.extent->i % factor != 0)
    refuse("jam", how, "its extent must be a constant that " + std::to_string(factor) + " divides");
  if (std::string why = detail::racing_store_in(loop); !why.empty()) refuse("jam", how, why);
  std::set<std::string> locals;
  for (const Stmt& s : loop.body) {
    if (s.kind == StmtKind::For) {
      if (mentions(s.extent, name)) refuse("jam", how, "the extent of " + s.var + " depends on " + name);
      for (const Stmt& c : s.body) {
        bool nested = false;
        walk(c.body, [&](const Stmt& x) { nested |= x.kind == StmtKind::For; return !nested; });
        if (nested || c.kind == StmtKind::For) refuse("jam", how, "loop " + s.var + " is not innermost");
      }
    } else if (s.kind == StmtKind::If) {
      bool has_loop = false;
      walk(s.body, [&](const Stmt& x) { has_loop |= x.kind == StmtKind::For; return !has_loop; });
      walk(s.else_body, [&](const Stmt& x) { has_loop |= x.kind == StmtKind::For; return !has_loop; });
      if (has_loop) refuse("jam", how, "a loop inside a condition");
    }
  }
  walk(loop.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::Alloc) refuse("jam", how, "it declares local array " + s.var);
    if (s.kind == StmtKind::Let) locals.insert(s.var);
    return true;
  });
  // copy j: the body with v := v*R + j and its locals renamed (copy 0 keeps the names)
  std::vector<std::vector<Stmt>> copies(factor);
  for (int j = 0; j < factor; ++j) {
    std::vector<Stmt> c = loop.body;
    substitute(c, name, add(mul(var(name), const_int(factor)), const_int(j)));
    if (j > 0)
      for (const std::string& l : locals) rename_local(c, l, detail::fresh(f, l + "_" + std::to_string(j)));
    copies[j] = std::move(c);
  }
  // statement by statement: the R copies of a loop fused into one, the others in a row
  std::vector<Stmt> body;
  for (size_t t = 0; t < loop.body.size(); ++t) {
    if (loop.body[t].kind == StmtKind::For) {
      Stmt fused = std::move(copies[0][t]);
      for (int j = 1; j < factor; ++j) {
        Stmt& c = copies[j][t];
        for (auto& s : c.body) fused.body.push_back(std::move(s));
        for (auto& r : c.reduces) fused.reduces.push_back(r);
      }
      body.push_back(std::move(fused));
    } else {
      for (int j = 0; j < factor; ++j) body.push_back(std::move(copies[j][t]));
    }
  }
  loop.body = std::move(body);
  loop.extent = const_int(loop.extent->i / factor);
  f.schedule_log.push_back("jam " + how);
}

}  // namespace lathe::loop
