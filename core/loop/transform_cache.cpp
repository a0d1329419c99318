// transform_cache.cpp — the `cache` schedule primitive: stage the tile of a buffer that a
// loop nest touches in a small local array (Halide's compute_at/store_at of a copy, TVM's
// cache_read / cache_write), with its legality checks. See transform.h.
//
// The tile lives in iteration space: an access buf[idx(v…)] inside the body of loop L is
// indexed by the loops v of that body that idx (its mask, and the `if` guards around it)
// mention — the tile's dims, each needing a constant extent; L and the loops around it are
// fixed for one iteration. Accesses whose index has the same shape up to renaming of those
// loops (softmax's passes over one row: in0[i0*40 + r1], in0[i0*40 + r0], in0[i0*40 + i1])
// share one local array. The tile's dims are ordered by decreasing stride in the buffer, so
// the copy loops read (or write) memory contiguously in their innermost loop. Locals bound
// by `let` in the body are inlined into indices; loop-carried ones (accumulators) refuse.
//   read:   for L: alloc t[n]; for s…: t[s…] = buf[idx(s…)]; body (buf[idx(v…)] → t[v…])
//   write:  for L: alloc t[n]; [copy in if the body reads buf]; body (stores → t); for s…: buf[idx(s…)] = t[s…]
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core/ir/diag.h"
#include "core/loop/transform.h"
#include "core/loop/transform_detail.h"

namespace lathe::loop {

namespace {

using detail::refuse;

// One loop of L's nest (L included) around an access.
struct Level {
  std::string var;
  ExprRef extent;
  int depth;
};

// A family of accesses that share one local array.
struct Group {
  std::string name;
  std::vector<int64_t> extents;  // per tile dim, outermost first
  ExprRef index, mask;           // over the canonical vars $0, $1, …
  std::vector<ExprRef> guards;   // ditto
  int64_t count = 1;
  bool loaded = false, stored = false;
  std::vector<int64_t> coeffs;   // affine stride of each dim in the buffer (when known)
  bool affine = false;
};

std::string canon(size_t k) { return "$" + std::to_string(k); }

void collect_vars(const ExprRef& e, std::set<std::string>& out) {
  if (!e) return;
  if (e->kind == ExprKind::Var) out.insert(e->name);
  for (auto& a : e->args) collect_vars(a, out);
}

bool has_load(const ExprRef& e) {
  if (!e) return false;
  if (e->kind == ExprKind::Load || e->kind == ExprKind::LocalLoad) return true;
  for (auto& a : e->args)
    if (has_load(a)) return true;
  return false;
}

// e = Σ coeff[v]·v + (terms free of `vars`)?  false when not affine in `vars`.
bool affine(const ExprRef& e, const std::set<std::string>& vars, std::map<std::string, int64_t>& coeff, int64_t scale) {
  bool any = false;
  for (auto& v : vars) any |= mentions(e, v);
  if (!any) return true;
  if (e->kind == ExprKind::Var) {
    coeff[e->name] += scale;
    return true;
  }
  if (e->kind != ExprKind::Binary || e->dtype != DType::I64 || e->lanes != 1) return false;
  if (e->op == Op::Add) return affine(e->args[0], vars, coeff, scale) && affine(e->args[1], vars, coeff, scale);
  if (e->op == Op::Mul && is_const(e->args[1])) return affine(e->args[0], vars, coeff, scale * e->args[1]->i);
  if (e->op == Op::Mul && is_const(e->args[0])) return affine(e->args[1], vars, coeff, scale * e->args[0]->i);
  return false;
}

class Cacher {
 public:
  // `outer`: the loops around the cached body (the cache loop and its ancestors).
  Cacher(LoopFunc& f, const std::string& at, std::set<std::string> outer, const std::vector<Stmt>& body, int param)
      : f_(f), param_(param), L_(at), outer_(std::move(outer)) {
    name_ = f.buffers[param].name;
    walk(body, [&](const Stmt& s) {
      if (s.kind == StmtKind::Assign) assigned_.insert(s.var);
      if (s.kind == StmtKind::Let || s.kind == StmtKind::For || s.kind == StmtKind::Alloc) declared_.insert(s.var);
      if (s.kind == StmtKind::Store && s.buffer != param_ && f.buffers[s.buffer].buffer == f.buffers[param_].buffer)
        refuse_here("it is also written as " + f.buffers[s.buffer].name + " (the same memory) inside the loop");
      if (s.kind == StmtKind::Store && s.buffer == param_) writes_ = true;
      return true;
    });
  }

  // Rewrites the cached body in place (a copy owned by the caller); fills groups().
  void rewrite(std::vector<Stmt>& body) {
    std::vector<Level> levels;
    std::vector<ExprRef> guards;
    visit_block(body, levels, {}, guards, 0);
  }

  bool writes() const { return writes_; }
  std::vector<Group>& groups() { return groups_; }
  const std::string& buffer_name() const { return name_; }
  bool needs_copy_in() const { return maybe_unwritten_; }

  [[noreturn]] void refuse_here(const std::string& why) const { refuse("cache", name_ + " at " + L_, why); }

 private:
  LoopFunc& f_;
  int param_;
  std::string name_, L_;
  std::set<std::string> outer_, assigned_, declared_;
  bool writes_ = false, maybe_unwritten_ = false;
  std::vector<Group> groups_;

  void visit_for(Stmt& s, std::vector<Level>& levels, std::map<std::string, ExprRef>& lets, std::vector<ExprRef>& guards,
                 int depth) {
    levels.push_back({s.var, s.extent, depth});
    visit_block(s.body, levels, lets, guards, depth + 1);
    levels.pop_back();
  }

  void visit_block(std::vector<Stmt>& body, std::vector<Level>& levels, std::map<std::string, ExprRef> lets,
                   std::vector<ExprRef>& guards, int depth) {
    for (Stmt& s : body) {
      switch (s.kind) {
        case StmtKind::For:
          s.extent = rw(s.extent, levels, lets, guards);
          visit_for(s, levels, lets, guards, depth);
          break;
        case StmtKind::If: {
          ExprRef cond = expand(s.cond, lets);
          s.cond = rw(s.cond, levels, lets, guards);
          guards.push_back(cond);
          visit_block(s.body, levels, lets, guards, depth);
          guards.back() = unary(Op::Not, cond);
          visit_block(s.else_body, levels, lets, guards, depth);
          guards.pop_back();
          break;
        }
        case StmtKind::Let:
          s.value = rw(s.value, levels, lets, guards);
          if (!assigned_.count(s.var)) lets[s.var] = expand(s.value, lets);
          break;
        case StmtKind::Store:
          s.value = rw(s.value, levels, lets, guards);
          if (s.buffer == param_) {
            if (s.value->lanes > 1) refuse_here("it is stored as a vector of " + std::to_string(s.value->lanes) + " lanes");
            for (auto& lv : levels)  // a store under a loop the tile does not span may never run
              if (!mentions(expand(s.index, lets), lv.var) && !(is_const(lv.extent) && lv.extent->i > 0))
                maybe_unwritten_ = true;
            auto [g, local] = access(s.index, nullptr, levels, lets, guards, /*store=*/true);
            Stmt st = make_local_store(groups_[g].name, local, s.value);
            s = std::move(st);
          } else {
            s.index = rw(s.index, levels, lets, guards);
          }
          break;
        default:
          for (auto* e : {&s.index, &s.value, &s.cond, &s.extent})
            if (*e) *e = rw(*e, levels, lets, guards);
          break;
      }
    }
  }

  // Rewrites loads of the cached buffer inside e (bottom-up).
  ExprRef rw(const ExprRef& e, const std::vector<Level>& levels, const std::map<std::string, ExprRef>& lets,
             const std::vector<ExprRef>& guards) {
    if (!e || e->args.empty()) return e;
    std::vector<ExprRef> args;
    bool changed = false;
    for (auto& a : e->args) {
      args.push_back(rw(a, levels, lets, guards));
      changed |= args.back() != a;
    }
    if (e->kind == ExprKind::Load && e->buffer == param_) {
      if (e->lanes > 1) refuse_here("it is loaded as a vector of " + std::to_string(e->lanes) + " lanes");
      auto [g, local] = access(e->args[0], e->args.size() > 1 ? e->args[1] : nullptr, levels, lets, guards, false);
      return local_load(groups_[g].name, e->dtype, local);
    }
    return changed ? with_args(e, std::move(args)) : e;
  }

  ExprRef expand(const ExprRef& e, const std::map<std::string, ExprRef>& lets) const {
    if (!e) return e;
    std::set<std::string> vs;
    collect_vars(e, vs);
    ExprRef r = e;
    for (auto& v : vs)
      if (auto it = lets.find(v); it != lets.end()) r = substitute(r, v, it->second);
    return r;
  }

  // Registers one access; returns its group and its index into the group's local array.
  std::pair<int, ExprRef> access(const ExprRef& index0, const ExprRef& mask0, const std::vector<Level>& levels,
                                 const std::map<std::string, ExprRef>& lets, const std::vector<ExprRef>& guards, bool store) {
    ExprRef index = expand(index0, lets), mask = expand(mask0, lets);
    std::set<std::string> names;
    collect_vars(index, names);
    collect_vars(mask, names);
    for (auto& g : guards) collect_vars(g, names);
    if (has_load(index) || has_load(mask)) refuse_here("its index depends on loaded data (an indirect access)");
    for (auto& g : guards)
      if (has_load(g)) refuse_here("an access sits under a condition that depends on loaded data");
    // the tile's dims: loops of L's nest that the access mentions
    std::vector<const Level*> dims;
    for (auto& lv : levels)
      if (names.count(lv.var)) dims.push_back(&lv);
    for (auto& n : names) {
      bool is_dim = std::any_of(dims.begin(), dims.end(), [&](const Level* l) { return l->var == n; });
      if (is_dim || outer_.count(n) || std::count(f_.dims.begin(), f_.dims.end(), n)) continue;
      if (assigned_.count(n)) refuse_here("its index uses " + n + ", which the loop updates");
      if (declared_.count(n)) refuse_here("its index uses " + n + ", which is not known before the loop");
    }
    for (auto* d : dims)
      if (!is_const(d->extent) || d->extent->i < 1)
        refuse_here("loop " + d->var + " has extent " + expr_key(d->extent) + "; the tile needs constant extents");
    // canonical order: decreasing stride in the buffer, then nesting depth
    std::set<std::string> dimset;
    for (auto* d : dims) dimset.insert(d->var);
    std::map<std::string, int64_t> coeff;
    bool aff = affine(index, dimset, coeff, 1);
    std::stable_sort(dims.begin(), dims.end(), [&](const Level* a, const Level* b) {
      int64_t ca = aff ? std::abs(coeff[a->var]) : 0, cb = aff ? std::abs(coeff[b->var]) : 0;
      return ca != cb ? ca > cb : a->depth < b->depth;
    });
    auto to_canon = [&](ExprRef e) {
      for (size_t k = 0; k < dims.size(); ++k) e = e ? substitute(e, dims[k]->var, var(canon(k))) : e;
      return e;
    };
    Group g;
    g.index = to_canon(index);
    g.mask = to_canon(mask);
    for (auto& gd : guards) g.guards.push_back(to_canon(gd));
    g.affine = aff;
    for (auto* d : dims) {
      g.extents.push_back(d->extent->i);
      g.coeffs.push_back(aff ? coeff[d->var] : 0);
      g.count *= d->extent->i;
      if (g.count > (int64_t)1 << 40) refuse_here("the tile is far too large");
    }
    std::string key = expr_key(g.index) + "|" + expr_key(g.mask);
    for (auto& gd : g.guards) key += "|" + expr_key(gd);
    for (auto e : g.extents) key += "|" + std::to_string(e);
    int gi = -1;
    for (size_t i = 0; i < groups_.size(); ++i)
      if (keys_[i] == key) gi = (int)i;
    if (gi < 0) {
      gi = (int)groups_.size();
      g.name = "$tile" + std::to_string(gi);  // placeholder until cache() picks a fresh name
      groups_.push_back(std::move(g));
      keys_.push_back(key);
    }
    (store ? groups_[gi].stored : groups_[gi].loaded) = true;
    ExprRef local = const_int(0);
    int64_t stride = 1;
    for (size_t k = dims.size(); k-- > 0;) {
      local = add(mul(var(dims[k]->var), const_int(stride)), local);
      stride *= groups_[gi].extents[k];
    }
    return {gi, local};
  }

  std::vector<std::string> keys_;
};

// for s0 in 0..E0: for s1 …: [if guards] body(s…) — the copy nest of a group.
Stmt copy_nest(LoopFunc& f, const Group& g, const std::string& suffix, const std::string& note,
               const std::function<Stmt(const std::vector<ExprRef>& s, const ExprRef& local)>& body) {
  std::vector<std::string> vars;
  std::vector<ExprRef> s;
  for (size_t k = 0; k < g.extents.size(); ++k) {
    std::string v = detail::fresh(f, g.name + "_" + suffix + std::to_string(k));
    vars.push_back(v);
    s.push_back(var(v));
  }
  ExprRef local = const_int(0);
  int64_t stride = 1;
  for (size_t k = s.size(); k-- > 0;) {
    local = add(mul(s[k], const_int(stride)), local);
    stride *= g.extents[k];
  }
  ExprRef cond;
  for (auto& gd : g.guards) {
    ExprRef c = gd;
    for (size_t k = 0; k < s.size(); ++k) c = substitute(c, canon(k), s[k]);
    cond = logical_and(cond, c);
  }
  std::vector<Stmt> inner{body(s, local)};
  if (cond) inner = {make_if(cond, std::move(inner))};
  for (size_t k = s.size(); k-- > 0;) {
    Stmt loop = make_for(vars[k], const_int(g.extents[k]), std::move(inner), note + " dim " + std::to_string(k));
    inner = {std::move(loop)};
  }
  return std::move(inner[0]);
}

ExprRef instantiate(const ExprRef& e, const std::vector<ExprRef>& s) {
  ExprRef r = e;
  for (size_t k = 0; r && k < s.size(); ++k) r = substitute(r, canon(k), s[k]);
  return r;
}

// Is buf[Σ c_k·v_k] one-to-one over the tile? (mixed-radix: each stride beyond the span of the smaller ones)
bool one_to_one(const Group& g) {
  if (!g.affine) return false;
  std::vector<std::pair<int64_t, int64_t>> cs;  // |coeff|, extent
  for (size_t k = 0; k < g.extents.size(); ++k) {
    if (g.extents[k] == 1) continue;
    if (g.coeffs[k] == 0) return false;
    cs.push_back({std::abs(g.coeffs[k]), g.extents[k]});
  }
  std::sort(cs.begin(), cs.end());
  int64_t span = 0;
  for (auto [c, e] : cs) {
    if (c <= span) return false;
    span += c * (e - 1);
  }
  return true;
}

}  // namespace

std::string cache(LoopFunc& f, std::string loop, std::string buffer) {
  // where: the body of `loop` (one iteration's tile), or the whole kernel for "root"
  std::vector<Stmt>* body = &f.body;
  std::set<std::string> outer;
  if (loop != "root") {
    detail::Found fd = detail::must_find(f, "cache", loop);
    for (auto* a : fd.ancestors) outer.insert(a->var);
    outer.insert(loop);
    body = &fd.get()->body;
  }
  int param = -1;
  std::string names;
  for (size_t i = 0; i < f.buffers.size(); ++i) {
    if (f.buffers[i].name == buffer) param = (int)i;
    names += (names.empty() ? "" : ", ") + f.buffers[i].name;
  }
  if (param < 0) refuse("cache", buffer + " at " + loop, f.name + " has no buffer " + buffer + " (buffers: " + names + ")");
  Cacher c(f, loop, outer, *body, param);
  std::vector<Stmt> nest = *body;
  c.rewrite(nest);
  auto& groups = c.groups();
  if (groups.empty()) c.refuse_here("the loop does not access " + buffer);
  int64_t bytes = 0;
  for (auto& g : groups) bytes += g.count * (int64_t)dtype_size(f.buffers[param].dtype);
  if (bytes > kMaxCacheBytes)
    c.refuse_here("the tile takes " + std::to_string(bytes) + " bytes, more than the " + std::to_string(kMaxCacheBytes) +
                  "-byte limit of a local buffer; cache at an inner loop or split first");
  if (c.writes()) {
    if (groups.size() != 1)
      c.refuse_here("its accesses of " + buffer + " use " + std::to_string(groups.size()) +
                    " different index patterns; a written buffer needs one");
    if (!one_to_one(groups[0]))
      c.refuse_here("cannot show that the store index of " + buffer + " is one-to-one over the tile (two iterations may write one element)");
  }
  // fresh names for the placeholders, then the copy nests around the rewritten body
  std::vector<Stmt> before, after;
  DType dt = f.buffers[param].dtype;
  std::vector<std::string> made;
  for (auto& g : groups) {
    std::string final_name = detail::fresh(f, buffer + "_tile");
    if (std::count(made.begin(), made.end(), final_name))  // fresh() sees f only
      final_name = detail::fresh(f, buffer + "_tile" + std::to_string(made.size() + 1));
    made.push_back(final_name);
    std::string old = g.name;
    g.name = final_name;
    std::function<ExprRef(const ExprRef&)> ren = [&](const ExprRef& e) -> ExprRef {
      if (!e || e->args.empty()) return e;
      std::vector<ExprRef> args;
      for (auto& a : e->args) args.push_back(ren(a));
      if (e->kind == ExprKind::LocalLoad && e->name == old) return local_load(final_name, e->dtype, args[0], e->lanes);
      return with_args(e, std::move(args));
    };
    walk(nest, [&](Stmt& s) {
      if (s.kind == StmtKind::LocalStore && s.var == old) s.var = final_name;
      for (auto* e : {&s.extent, &s.cond, &s.index, &s.value}) *e = ren(*e);
      return true;
    });
    before.push_back(make_alloc(final_name, dt, 1, g.count));
    if (!c.writes() || g.loaded || c.needs_copy_in())
      before.push_back(copy_nest(f, g, "s", "cache " + buffer + " in " + final_name, [&](const std::vector<ExprRef>& s, const ExprRef& local) {
        return make_local_store(final_name, local, load(param, dt, instantiate(g.index, s), instantiate(g.mask, s)));
      }));
    if (c.writes())
      after.push_back(copy_nest(f, g, "w", "write " + final_name + " back to " + buffer, [&](const std::vector<ExprRef>& s, const ExprRef& local) {
        return make_store(param, instantiate(g.index, s), local_load(final_name, dt, local));
      }));
  }
  nest.insert(nest.begin(), before.begin(), before.end());
  nest.insert(nest.end(), after.begin(), after.end());
  *body = std::move(nest);
  std::string what = made[0] + "[" + std::to_string(groups[0].count) + "]";
  for (size_t i = 1; i < made.size(); ++i) what += ", " + made[i] + "[" + std::to_string(groups[i].count) + "]";
  f.schedule_log.push_back("cache " + buffer + " at " + loop + " -> " + what + (c.writes() ? " (written back)" : ""));
  return made.size() == 1 ? made[0] : what;
}

}  // namespace lathe::loop
