// transform.cpp — the schedule primitives (split, reorder, tile, fuse, vectorize, unroll,
// parallel) with their legality checks. See transform.h; cache is in transform_cache.cpp.
#include "core/loop/transform.h"

#include <set>

#include "core/ir/diag.h"
#include "core/loop/transform_detail.h"

namespace lathe::loop {

namespace detail {

namespace {

bool find_loop(std::vector<Stmt>& body, const std::string& name, Found& out, std::vector<const Stmt*>& anc) {
  for (size_t i = 0; i < body.size(); ++i) {
    Stmt& s = body[i];
    if (s.kind == StmtKind::For && s.var == name) {
      out.parent = &body;
      out.index = i;
      out.ancestors = anc;
      return true;
    }
    if (s.kind == StmtKind::For) anc.push_back(&s);
    bool hit = find_loop(s.body, name, out, anc) || find_loop(s.else_body, name, out, anc);
    if (s.kind == StmtKind::For) anc.pop_back();
    if (hit) return true;
  }
  return false;
}

}  // namespace

void refuse(const std::string& prim, const std::string& loop, const std::string& why) {
  throw UserError(prim + " " + loop + ": " + why);
}

Found must_find(LoopFunc& f, const std::string& prim, const std::string& loop) {
  Found r;
  std::vector<const Stmt*> anc;
  if (!find_loop(f.body, loop, r, anc)) {
    std::string names;
    for (auto& n : loop_names(f)) names += (names.empty() ? "" : ", ") + n;
    refuse(prim, loop, "no such loop in " + f.name + " (loops: " + (names.empty() ? "none" : names) + ")");
  }
  return r;
}

std::string fresh(const LoopFunc& f, const std::string& base) {
  std::set<std::string> used;
  walk(f.body, [&](const Stmt& s) { used.insert(s.var); return true; });
  for (auto& b : f.buffers) used.insert(b.name);
  std::string n = base;
  for (int i = 2; used.count(n); ++i) n = base + std::to_string(i);
  return n;
}

}  // namespace detail

namespace {

using detail::Found;
using detail::must_find;
using detail::refuse;
using detail::fresh;

bool contains_loop(const std::vector<Stmt>& body) {
  bool any = false;
  walk(body, [&](const Stmt& s) { any |= s.kind == StmtKind::For; return !any; });
  return any;
}

// locals declared (Let/Alloc) inside a statement list
std::set<std::string> declared_in(const std::vector<Stmt>& body) {
  std::set<std::string> d;
  walk(body, [&](const Stmt& s) {
    if (s.kind == StmtKind::Let || s.kind == StmtKind::Alloc || s.kind == StmtKind::For) d.insert(s.var);
    return true;
  });
  return d;
}

// A store whose address does not depend on the loop var writes the same element from
// every iteration: that is a dependence, not a parallel loop.
std::string racing_store(const Stmt& loop) {
  std::string why;
  std::set<std::string> inner = declared_in(loop.body);
  walk(loop.body, [&](const Stmt& s) {
    if (!why.empty()) return false;
    // a store (to memory or to a local array declared outside) must write a different
    // element in every iteration
    bool outer_array = s.kind == StmtKind::LocalStore && !inner.count(s.var);
    if ((s.kind == StmtKind::Store || outer_array) && !mentions(s.index, loop.var)) {
      bool via_inner = false;  // index may depend on a local derived from the loop var
      for (auto& v : inner)
        if (mentions(s.index, v)) via_inner = true;
      if (!via_inner)
        why = outer_array ? "iterations update " + s.var + ", declared outside the loop, at the same index"
                          : "every iteration writes the same element (store index does not use " + loop.var + ")";
    }
    if (s.kind == StmtKind::Assign && !inner.count(s.var))
      why = "iterations update " + s.var + ", declared outside the loop";
    return true;
  });
  return why;
}

void log(LoopFunc& f, const std::string& line) { f.schedule_log.push_back(line); }

}  // namespace

std::string detail::racing_store_in(const Stmt& loop) { return racing_store(loop); }

std::vector<std::string> loop_names(const LoopFunc& f) {
  std::vector<std::string> r;
  walk(f.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::For) r.push_back(s.var);
    return true;
  });
  return r;
}

void split(LoopFunc& f, std::string name, int64_t factor) {
  Found fd = must_find(f, "split", name);
  if (factor < 1) refuse("split", name, "factor must be at least 1, got " + std::to_string(factor));
  Stmt& loop = *fd.get();
  std::string vo = fresh(f, name + "_o"), vi = fresh(f, name + "_i");
  ExprRef idx = add(mul(var(vo), const_int(factor)), var(vi));
  std::vector<Stmt> body = std::move(loop.body);
  substitute(body, name, idx);
  bool exact = is_const(loop.extent) && loop.extent->i % factor == 0;
  if (!exact) body = {make_if(lt(idx, loop.extent), std::move(body))};
  Stmt inner = make_for(vi, const_int(factor), std::move(body), loop.note + " (inner)");
  inner.annot.vectorize = loop.annot.vectorize;
  inner.annot.unroll = loop.annot.unroll;
  inner.reduces = loop.reduces;
  inner.reduce_op = loop.reduce_op;
  ExprRef outer_extent = is_const(loop.extent) ? const_int((loop.extent->i + factor - 1) / factor)
                                               : binary(Op::IDiv, add(loop.extent, const_int(factor - 1)), const_int(factor));
  Stmt outer = make_for(vo, outer_extent, {std::move(inner)}, loop.note + " (outer)");
  outer.annot.parallel = loop.annot.parallel;
  outer.reduces = loop.reduces;
  outer.reduce_op = loop.reduce_op;
  loop = std::move(outer);
  log(f, "split " + name + " by " + std::to_string(factor) + " -> " + vo + ", " + vi);
}

void reorder(LoopFunc& f, std::string a, std::string b) {
  Found fd = must_find(f, "reorder", a);
  Stmt& outer = *fd.get();
  if (outer.body.size() != 1 || outer.body[0].kind != StmtKind::For || outer.body[0].var != b) {
    std::string why = "loop " + b + " is not the only statement in " + a + "'s body";
    for (auto& s : outer.body)
      if (s.kind == StmtKind::Let) why += " (" + s.var + " is computed between them)";
    refuse("reorder", a + " " + b, "not perfectly nested: " + why);
  }
  Stmt& inner = outer.body[0];
  if (mentions(inner.extent, a)) refuse("reorder", a + " " + b, "the extent of " + b + " depends on " + a);
  if (outer.reduces != inner.reduces && (!outer.reduces.empty() || !inner.reduces.empty()))
    refuse("reorder", a + " " + b, "only one of them carries a reduction");
  std::swap(outer.var, inner.var);
  std::swap(outer.extent, inner.extent);
  std::swap(outer.annot, inner.annot);
  std::swap(outer.note, inner.note);
  log(f, "reorder " + a + " " + b);
}

void tile(LoopFunc& f, std::string a, std::string b, int64_t fa, int64_t fb) {
  LoopFunc backup = f;
  try {
    // the loops split made, as its log names them (fresh names when a_i or b_o were taken)
    auto made = [&f](bool inner) {
      const std::string& l = f.schedule_log.back();
      size_t arrow = l.rfind(" -> "), comma = l.rfind(", ");
      return inner ? l.substr(comma + 2) : l.substr(arrow + 4, comma - arrow - 4);
    };
    split(f, a, fa);
    std::string ai = made(true);
    split(f, b, fb);
    std::string bo = made(false);
    Found fd = must_find(f, "tile", ai);
    Stmt* s = fd.get();
    // split(b) may have put a guard between a_i and b_o when a's extent was not a multiple
    if (s->body.size() == 1 && s->body[0].kind == StmtKind::If) refuse("tile", a, "the extent is not a multiple of " + std::to_string(fa));
    reorder(f, ai, bo);
  } catch (...) {
    f = std::move(backup);
    throw;
  }
  f.schedule_log.resize(f.schedule_log.size() - 3);
  log(f, "tile " + a + " " + b + " by " + std::to_string(fa) + "x" + std::to_string(fb));
}

void fuse(LoopFunc& f, std::string a, std::string b) {
  Found fd = must_find(f, "fuse", a);
  Stmt& outer = *fd.get();
  if (outer.body.size() != 1 || outer.body[0].kind != StmtKind::For || outer.body[0].var != b)
    refuse("fuse", a + " " + b, "not perfectly nested (" + b + " must be the only statement in " + a + ")");
  if (mentions(outer.body[0].extent, a)) refuse("fuse", a + " " + b, "the extent of " + b + " depends on " + a);
  if (outer.reduces != outer.body[0].reduces) refuse("fuse", a + " " + b, "only one of them carries a reduction");
  Stmt inner = std::move(outer.body[0]);  // checked first: a refusal leaves f as it was
  std::string v = fresh(f, a + "_" + b);
  ExprRef nb = inner.extent;
  std::vector<Stmt> body = std::move(inner.body);
  substitute(body, a, binary(Op::IDiv, var(v), nb));
  substitute(body, b, binary(Op::Mod, var(v), nb));
  Stmt fused = make_for(v, mul(outer.extent, nb), std::move(body), outer.note + " × " + inner.note);
  fused.annot.parallel = outer.annot.parallel;
  fused.annot.vectorize = inner.annot.vectorize;
  fused.reduces = outer.reduces;
  fused.reduce_op = outer.reduce_op;
  outer = std::move(fused);
  log(f, "fuse " + a + " " + b + " -> " + v);
}

void vectorize(LoopFunc& f, std::string name) {
  Found fd = must_find(f, "vectorize", name);
  Stmt& loop = *fd.get();
  if (contains_loop(loop.body)) refuse("vectorize", name, "it contains other loops; vectorize the innermost loop");
  bool alloc = false;
  walk(loop.body, [&](const Stmt& s) { alloc |= s.kind == StmtKind::Alloc; return true; });
  if (alloc) refuse("vectorize", name, "its body allocates a local array");
  if (loop.reduces.empty()) {
    std::string why = racing_store(loop);
    if (!why.empty()) refuse("vectorize", name, why);
  }
  loop.annot.vectorize = true;
  log(f, "vectorize " + name);
}

void peel(LoopFunc& f, std::string name, int64_t width, bool masked) {
  std::string how = name + " by " + std::to_string(width) + (masked ? " masked" : "");
  if (width < 2 || width > 64 || (width & (width - 1))) refuse("peel", how, "width must be a power of two from 2 to 64");
  Found fd = must_find(f, "peel", name);
  {
    Stmt& loop = *fd.get();
    if (contains_loop(loop.body)) refuse("peel", how, "it contains other loops; peel the innermost loop");
    if (loop.annot.parallel) refuse("peel", how, "it is a parallel loop");
  }
  vectorize(f, name);  // its legality checks (logs a line: dropped below)
  f.schedule_log.pop_back();
  fd = must_find(f, "peel", name);
  Stmt& loop = *fd.get();
  loop.annot.width = static_cast<int>(width);
  loop.annot.masked = false;
  ExprRef main_extent, tail_extent;
  if (is_const(loop.extent)) {
    int64_t e = loop.extent->i;
    main_extent = const_int(e - e % width);
    tail_extent = const_int(e % width);
  } else {
    main_extent = mul(binary(Op::IDiv, loop.extent, const_int(width)), const_int(width));
    tail_extent = binary(Op::Mod, loop.extent, const_int(width));
  }
  if (!is_const(tail_extent, 0)) {
    std::string vt = fresh(f, name + "_t");
    std::vector<Stmt> body = loop.body;
    substitute(body, name, add(main_extent, var(vt)));
    Stmt tail = make_for(vt, tail_extent, std::move(body), loop.note.empty() ? "tail" : loop.note + " (tail)");
    tail.reduces = loop.reduces;
    tail.reduce_op = loop.reduce_op;
    tail.annot.vectorize = masked;
    tail.annot.width = masked ? static_cast<int>(width) : 0;
    tail.annot.masked = masked;
    loop.extent = main_extent;
    std::vector<Stmt>& parent = *fd.parent;
    size_t at = fd.index + 1;
    if (is_const(main_extent, 0)) parent.erase(parent.begin() + (long)fd.index), --at;
    parent.insert(parent.begin() + (long)at, std::move(tail));
  }
  log(f, "peel " + how);
}

void unroll(LoopFunc& f, std::string name, int factor) {
  Found fd = must_find(f, "unroll", name);
  Stmt& loop = *fd.get();
  if (factor < 0) refuse("unroll", name, "factor must be >= 0");
  if (factor == 0) {
    if (!is_const(loop.extent)) refuse("unroll", name, "full unroll needs a constant extent");
    if (loop.extent->i > 64) refuse("unroll", name, "extent " + std::to_string(loop.extent->i) + " is too large to unroll fully (max 64); give a factor");
    factor = static_cast<int>(loop.extent->i);
  }
  loop.annot.unroll = factor;
  log(f, "unroll " + name + " by " + std::to_string(factor));
}

void parallel(LoopFunc& f, std::string name) {
  Found fd = must_find(f, "parallel", name);
  Stmt& loop = *fd.get();
  if (!loop.reduces.empty()) refuse("parallel", name, "axis " + name + " carries a reduction into " + loop.reduces[0]);
  for (const Stmt* a : fd.ancestors)
    if (a->annot.parallel) refuse("parallel", name, "it is already inside parallel loop " + a->var);
  bool inner_par = false;
  walk(loop.body, [&](const Stmt& s) { inner_par |= s.kind == StmtKind::For && s.annot.parallel; return true; });
  if (inner_par) refuse("parallel", name, "it contains a parallel loop");
  std::string why = racing_store(loop);
  if (!why.empty()) refuse("parallel", name, why);
  loop.annot.parallel = true;
  log(f, "parallel " + name);
}

}  // namespace lathe::loop
