// operand_place.cpp — place_concat_operands (see operand_place.h).
#include "core/schedule/operand_place.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace lathe {

namespace {

using loop::ExprKind;
using loop::ExprRef;
using loop::Stmt;
using loop::StmtKind;

// An i64 index as Σ coeff · term + c: terms are variables or, for what is not affine,
// whole subexpressions (by their key, never given a range)
struct Lin {
  std::map<std::string, int64_t> terms;
  int64_t c = 0;
};

Lin plus(Lin a, const Lin& b, int64_t scale = 1) {
  for (auto& [k, v] : b.terms) {
    a.terms[k] += v * scale;
    if (a.terms[k] == 0) a.terms.erase(k);
  }
  a.c += b.c * scale;
  return a;
}

struct Range {
  int64_t lo, hi;  // inclusive
};

struct Ctx {
  std::map<std::string, Range> range;     // loop variables
  std::map<std::string, ExprRef> lets;    // scalar locals never assigned: their values
};

Lin lin_of(const ExprRef& e, const Ctx& ctx, int depth = 0) {
  Lin r;
  if (e->kind == ExprKind::Const && !is_float(e->dtype) && e->lanes == 1) {
    r.c = e->i;
    return r;
  }
  if (e->kind == ExprKind::Var && e->lanes == 1) {
    auto it = ctx.lets.find(e->name);
    if (it != ctx.lets.end() && depth < 32 && !is_float(it->second->dtype)) return lin_of(it->second, ctx, depth + 1);
    r.terms[e->name] = 1;
    return r;
  }
  if (e->kind == ExprKind::Binary && e->lanes == 1 && !is_float(e->dtype)) {
    if (e->op == Op::Add) return plus(lin_of(e->args[0], ctx, depth), lin_of(e->args[1], ctx, depth));
    if (e->op == Op::Mul) {
      Lin a = lin_of(e->args[0], ctx, depth), b = lin_of(e->args[1], ctx, depth);
      if (a.terms.empty()) std::swap(a, b);
      if (b.terms.empty()) {
        Lin z;
        return plus(z, a, b.c);
      }
    }
  }
  r.terms["#" + loop::expr_key(e)] = 1;
  return r;
}

// the range of an index over the loop ranges (nullopt: a term without one)
std::optional<Range> range_of(const Lin& l, const Ctx& ctx) {
  __int128 lo = l.c, hi = l.c;
  for (auto& [k, v] : l.terms) {
    auto it = ctx.range.find(k);
    if (it == ctx.range.end()) return std::nullopt;
    const __int128 a = static_cast<__int128>(v) * it->second.lo, b = static_cast<__int128>(v) * it->second.hi;
    lo += std::min(a, b);
    hi += std::max(a, b);
  }
  const __int128 big = std::numeric_limits<int64_t>::max() / 4;
  if (lo < -big || hi > big) return std::nullopt;
  return Range{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

bool zero_float(const ExprRef& e) {
  if (e->kind == ExprKind::Broadcast) return zero_float(e->args[0]);
  return e->kind == ExprKind::Const && is_float(e->dtype) && e->f == 0;
}

ExprRef resolve(ExprRef e, const Ctx& ctx) {
  for (int i = 0; i < 32 && e->kind == ExprKind::Var; ++i) {
    auto it = ctx.lets.find(e->name);
    if (it == ctx.lets.end() || it->second->lanes != e->lanes) break;
    e = it->second;
  }
  return e;
}

// The load a stored value copies unchanged (x, x + 0.0, 0.0 + x), or nullptr
ExprRef copied_load(const ExprRef& value, const Ctx& ctx) {
  ExprRef v = resolve(value, ctx);
  if (v->kind == ExprKind::Binary && v->op == Op::Add && is_float(v->dtype)) {
    if (zero_float(resolve(v->args[1], ctx))) v = resolve(v->args[0], ctx);
    else if (zero_float(resolve(v->args[0], ctx))) v = resolve(v->args[1], ctx);
    else return nullptr;
  }
  if (v->kind != ExprKind::Load || v->args.size() != 1) return nullptr;
  return v;
}

struct StoreInfo {
  const Stmt* stmt;
  int copies_param = -1;        // a copy of this param (at element `at`), or -1
  int64_t at = 0;
  std::optional<Range> range;   // the elements it writes
};

void collect(const std::vector<Stmt>& body, Ctx ctx, const std::set<std::string>& assigned, std::vector<StoreInfo>& out) {
  for (const Stmt& s : body) {
    switch (s.kind) {
      case StmtKind::Let:
        if (!assigned.count(s.var)) ctx.lets[s.var] = s.value;
        break;
      case StmtKind::For: {
        Ctx inner = ctx;
        const Lin e = lin_of(s.extent, ctx);
        inner.range.erase(s.var);
        if (e.terms.empty() && e.c >= 1) inner.range[s.var] = {0, e.c - 1};
        collect(s.body, inner, assigned, out);
        break;
      }
      case StmtKind::If: {
        Ctx then_ctx = ctx, else_ctx = ctx;
        // v < C: v <= C - 1 in the body, v >= C in the else branch (C < v: the reverse)
        if (s.cond->kind == ExprKind::Binary && s.cond->op == Op::CmpLT && s.cond->lanes == 1) {
          const Lin a = lin_of(s.cond->args[0], ctx), b = lin_of(s.cond->args[1], ctx);
          if (a.terms.size() == 1 && a.terms.begin()->second == 1 && a.c == 0 && b.terms.empty()) {
            const std::string& v = a.terms.begin()->first;
            if (then_ctx.range.count(v)) then_ctx.range[v].hi = std::min(then_ctx.range[v].hi, b.c - 1);
            if (else_ctx.range.count(v)) else_ctx.range[v].lo = std::max(else_ctx.range[v].lo, b.c);
          } else if (b.terms.size() == 1 && b.terms.begin()->second == 1 && b.c == 0 && a.terms.empty()) {
            const std::string& v = b.terms.begin()->first;
            if (then_ctx.range.count(v)) then_ctx.range[v].lo = std::max(then_ctx.range[v].lo, a.c + 1);
            if (else_ctx.range.count(v)) else_ctx.range[v].hi = std::min(else_ctx.range[v].hi, a.c);
          }
        }
        collect(s.body, then_ctx, assigned, out);
        collect(s.else_body, else_ctx, assigned, out);
        break;
      }
      case StmtKind::Store: {
        StoreInfo st{&s};
        const Lin idx = lin_of(s.index, ctx);
        st.range = range_of(idx, ctx);
        if (st.range && s.value->lanes > 1) st.range->hi += s.value->lanes - 1;
        if (st.range && st.range->lo > st.range->hi) st.range.reset();  // (an empty loop: no claim either way)
        if (ExprRef ld = copied_load(s.value, ctx); ld && ld->lanes == s.value->lanes) {
          const Lin d = plus(idx, lin_of(ld->args[0], ctx), -1);
          if (d.terms.empty()) {
            st.copies_param = ld->buffer;
            st.at = d.c;
          }
        }
        out.push_back(st);
        break;
      }
      default:
        break;
    }
  }
}

// Drops the stores in `drop`, then what they leave empty: loops, unread scalar locals, an
// `if (v < C)` whose else branch is gone narrows its loop (and the reverse starts it at C)

// whether a statement of `stmts` (or one inside them) reads `name`
bool used_in(const std::vector<Stmt>& stmts, const std::string& name) {
  bool used = false;
  loop::walk(stmts, [&](const Stmt& s) {
    if (s.kind == StmtKind::Assign && s.var == name) used = true;
    return !used;
  });
  loop::walk_exprs(stmts, [&](const ExprRef& e) {
    if (!used && loop::mentions(e, name)) used = true;
  });
  return used;
}

void drop_stores(std::vector<Stmt>& body, const std::set<const Stmt*>& drop) {
  std::vector<Stmt> kept;
  for (Stmt& s : body) {
    if (s.kind == StmtKind::Store && drop.count(&s)) continue;
    if (s.kind == StmtKind::For) {
      drop_stores(s.body, drop);
      if (s.body.empty()) continue;
    }
    if (s.kind == StmtKind::If) {
      drop_stores(s.body, drop);
      drop_stores(s.else_body, drop);
      if (s.body.empty() && s.else_body.empty()) continue;
    }
    kept.push_back(std::move(s));
  }
  body = std::move(kept);
}

// unread lets (after the drops), innermost first, until nothing changes; then empty loops
bool prune(std::vector<Stmt>& body) {
  bool changed = false;
  std::vector<Stmt> kept;
  for (Stmt& s : body) {
    if (s.kind == StmtKind::For || s.kind == StmtKind::If) {
      changed |= prune(s.body);
      changed |= prune(s.else_body);
      if (s.body.empty() && s.else_body.empty()) {
        changed = true;
        continue;
      }
    }
    kept.push_back(std::move(s));
  }
  body = std::move(kept);
  // a let that no later statement of its scope reads (a scalar local is seen only there)
  for (size_t i = body.size(); i-- > 0;)
    if (body[i].kind == StmtKind::Let &&
        !used_in(std::vector<Stmt>(body.begin() + static_cast<long>(i) + 1, body.end()), body[i].var)) {
      body.erase(body.begin() + static_cast<long>(i));
      changed = true;
    }
  return changed;
}

// a loop whose body is one `if (v < C)` on its own variable with one branch empty: the loop
// runs the other branch's range only (its iterations spread over threads as before)
void narrow_guarded_loops(std::vector<Stmt>& body) {
  for (Stmt& s : body) {
    narrow_guarded_loops(s.body);
    narrow_guarded_loops(s.else_body);
    if (s.kind != StmtKind::For || s.body.size() != 1 || s.body[0].kind != StmtKind::If) continue;
    Stmt& g = s.body[0];
    if (!loop::is_const(s.extent) || g.cond->kind != ExprKind::Binary || g.cond->op != Op::CmpLT) continue;
    const ExprRef& a = g.cond->args[0];
    const ExprRef& b = g.cond->args[1];
    if (a->kind != ExprKind::Var || a->name != s.var || !loop::is_const(b)) continue;
    const int64_t n = s.extent->i, C = b->i;
    if (C <= 0 || C >= n) continue;
    if (g.else_body.empty()) {  // for v in 0..n: if (v < C) body  ->  for v in 0..C: body
      std::vector<Stmt> inner = std::move(g.body);
      s.body = std::move(inner);
      s.extent = loop::const_int(C);
    } else if (g.body.empty()) {  // ... else body  ->  for v in 0..n-C: body[v + C]
      std::vector<Stmt> inner = std::move(g.else_body);
      loop::substitute(inner, s.var, loop::add(loop::var(s.var), loop::const_int(C)));
      s.body = std::move(inner);
      s.extent = loop::const_int(n - C);
    }
  }
}

}  // namespace

bool concat_in_place_enabled() {
  const char* e = std::getenv("LATHE_CONCAT_IN_PLACE");
  return e && e[0] == '1';
}

int place_concat_operands(const KernelGraph& kg, std::vector<loop::LoopFunc>& funcs) {
  if (!concat_in_place_enabled()) return 0;
  const size_t nb = kg.buffers.size();
  std::vector<int> writers(nb, 0), writer(nb, -1);
  for (const Kernel& k : kg.kernels) {
    ++writers[static_cast<size_t>(k.output)];
    writer[static_cast<size_t>(k.output)] = k.id;
  }
  std::vector<bool> holds(nb, false), placed(nb, false);  // holds placed operands / is placed
  auto numel = [&](int b) -> std::optional<int64_t> {
    const Shape& sh = kg.buffers[static_cast<size_t>(b)].shape;
    if (!shape_is_const(sh)) return std::nullopt;
    int64_t n = 1;
    for (auto& d : sh) n *= d.value();
    return n;
  };
  int count = 0;
  for (const Kernel& k : kg.kernels) {
    if (k.id >= static_cast<int>(funcs.size())) break;
    loop::LoopFunc& f = funcs[static_cast<size_t>(k.id)];
    const int Y = k.output;
    if (f.kind != "elementwise" || f.buffers.empty() || f.buffers[0].buffer != Y || !f.placed.empty()) continue;
    const BufferDesc& yb = kg.buffers[static_cast<size_t>(Y)];
    const auto ny = numel(Y);
    if (yb.kind != BufferKind::Intermediate || writers[static_cast<size_t>(Y)] != 1 || placed[static_cast<size_t>(Y)] || !ny)
      continue;
    if (f.buffers[0].offset != 0) continue;
    std::set<std::string> assigned;
    loop::walk(f.body, [&](const Stmt& s) {
      if (s.kind == StmtKind::Assign) assigned.insert(s.var);
      return true;
    });
    std::vector<StoreInfo> stores;
    collect(f.body, Ctx{}, assigned, stores);
    // the candidates: params copied by every store that reads them as a copy, at one element
    std::map<int, int64_t> at;  // param -> element
    std::set<int> refused;
    for (auto& st : stores) {
      if (st.stmt->buffer != 0) continue;
      if (st.copies_param < 1) continue;
      const int p = st.copies_param;
      if (at.count(p) && at[p] != st.at) refused.insert(p);
      at.emplace(p, st.at);
    }
    std::vector<loop::LoopFunc::Placed> chosen;
    std::set<const Stmt*> drop;
    std::set<int> taken_buffers;
    for (auto& [p, c] : at) {
      if (refused.count(p)) continue;
      const loop::BufferParam& bp = f.buffers[static_cast<size_t>(p)];
      const int X = bp.buffer;
      const BufferDesc& xb = kg.buffers[static_cast<size_t>(X)];
      const auto nx = numel(X);
      if (X == Y || bp.written || bp.offset != 0 || xb.kind != BufferKind::Intermediate || xb.dtype != yb.dtype || !nx ||
          writers[static_cast<size_t>(X)] != 1 || writer[static_cast<size_t>(X)] >= k.id || holds[static_cast<size_t>(X)] ||
          placed[static_cast<size_t>(X)] || taken_buffers.count(X))
        continue;
      const int64_t bytes = static_cast<int64_t>(dtype_size(yb.dtype));
      if (c < 0 || c + *nx > *ny || (c * bytes) % 64 != 0) continue;
      // (another param for the same buffer: it must be read only, which it is, and by the same copies)
      bool ok = true;
      std::set<const Stmt*> mine;
      for (auto& st : stores) {
        if (st.stmt->buffer != 0) continue;  // (stores to other params: none in an elementwise kernel)
        const bool copy = st.copies_param >= 1 && f.buffers[static_cast<size_t>(st.copies_param)].buffer == X;
        if (copy) {
          if (st.copies_param != p || !st.range || st.range->lo < c || st.range->hi >= c + *nx) ok = false;
          else mine.insert(st.stmt);
        } else if (!st.range || !(st.range->hi < c || st.range->lo >= c + *nx)) {
          ok = false;  // may write inside the slice
        }
      }
      for (auto& st : stores)
        if (st.stmt->buffer != 0) ok = false;
      if (!ok || mine.empty()) continue;
      // (two operands' slices never overlap: each one's copies lie in its own slice, which
      // every other store avoids)
      chosen.push_back({p, c});
      drop.insert(mine.begin(), mine.end());
      taken_buffers.insert(X);
    }
    if (chosen.empty()) continue;
    drop_stores(f.body, drop);
    while (prune(f.body)) {
    }
    narrow_guarded_loops(f.body);
    for (auto& pl : chosen) {
      const int X = f.buffers[static_cast<size_t>(pl.param)].buffer;
      placed[static_cast<size_t>(X)] = true;
      f.placed.push_back(pl);
      f.schedule_log.push_back("place " + f.buffers[static_cast<size_t>(pl.param)].name + " inside " + f.buffers[0].name +
                               " at element " + std::to_string(pl.at) + " (its copy dropped)");
      ++count;
    }
    holds[static_cast<size_t>(Y)] = true;
  }
  return count;
}

}  // namespace lathe
