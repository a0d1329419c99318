// kernel_param.cpp — see kernel_param.h.
#include "backends/kernel_param.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace lathe {

using loop::Expr;
using loop::ExprKind;
using loop::ExprRef;
using loop::Stmt;
using loop::StmtKind;

namespace {

// Is a literal at this place free to become a run-time value?
// min_free: the place's rule, the smallest value a literal there may have to be free
// (kAny, kNever, or kLongTrip in a serial loop's extent)
constexpr int64_t kAny = INT64_MIN, kNever = INT64_MAX;
// min_trip == kClasses: every trip count is free, but a loop's literal trip count puts its
// size class into the grouping key (size_class below), so a code is shared only by kernels
// whose loops are alike in length.
constexpr int64_t kClasses = kShapeParamClasses, kHoist = kShapeParamHoist;
// size classes (kClasses, and kHoist, which adds the rules below to them)
bool classed(int64_t min_trip) { return min_trip == kClasses || min_trip == kHoist; }
bool free_literal(const Expr& e, int64_t min_free) {
  return e.kind == ExprKind::Const && e.dtype == DType::I64 && e.lanes == 1 && e.i >= min_free;
}
// Is operand k of e a place whose literals must stay constants? (and everything below it)
// A divisor, where it is evaluated inside a loop (hot): a division by a run-time value is a
// hardware divide, by a constant a multiply. Outside loops, or once per iteration of the
// parallel loop that splits the work (planes x row bands), it costs nothing measurable.
// With kHoist only a division inside an innermost loop counts as hot: elsewhere it runs
// once per run of an inner loop (a GEMM's count of M blocks, `(msz + 95) / 96`).
int64_t operand_rule(const Expr& e, size_t k, bool hot, int64_t min_free) {
  return hot && e.kind == ExprKind::Binary && (e.op == Op::IDiv || e.op == Op::Mod) && k == 1 ? kNever : min_free;
}

// Tracks whether the statements being walked are inside a hot loop: any loop but one
// outermost parallel loop.
struct LoopDepth {
  int loops = 0;
  bool serial = false;  // one of them is not parallel
  bool inner = false;   // inside an innermost serial loop (kClasses: its literals stay constants)
  bool hot() const { return loops > 1 || serial; }
};
// A serial loop's literal trip counts (and those in its extent expression) under 32 stay
// constants: short loops whose trip count is known only at run time run worse (MobileNetV2's
// 7x7 and 14x14 depthwise layers ran 1.4-1.8x slower in one code with the 112x112 one);
// a loop the IR unrolls keeps its trip count; the parallel loop's (planes, row bands, GEMM
// jobs) is free.
int64_t extent_rule(const Stmt& s, int64_t min_trip) {
  if (s.kind != StmtKind::For) return kAny;
  if (s.annot.unroll > 1 || s.annot.stride > 1) return kNever;  // (a strided copy: llvm emits it whole)
  if (s.annot.transpose) return kNever;  // (a transposing copy's two loops: llvm emits blocks of constant trips)
  return s.annot.parallel || classed(min_trip) ? kAny : min_trip;
}
// The size class of a vectorized loop's literal trip count (kClasses): how the vectorizer
// would treat the loop with the count known. Counts under 16 stay exact (with the count
// known, a loop that short is one or two vectors, masked or unrolled; unknown, a vector loop
// that barely runs and a scalar remainder); longer ones share a class, split by whether
// whole 8-lane vectors cover them (no remainder when known).
std::string size_class(int64_t v) {
  if (v < 16) return "=" + std::to_string(v);
  return v % 8 == 0 ? "Lv" : "Lr";
}
// Trip count literals of a vectorized loop get classes; other serial loops' counts are free
// (a loop over whole vectors or rows costs the same with its count known at run time).
bool classed_extent(const Stmt& s) {
  return s.kind == StmtKind::For && s.annot.unroll <= 1 && !s.annot.parallel && s.annot.vectorize;
}

// Is s a serial loop with no loop inside (the code that runs most often)? With size classes
// (kClasses) the literals in its body stay constants: strides and offsets of the innermost
// loads fold into addressing, and equal trip counts give equal code. (U-Net's GEMM kernels
// with other K blocks and its max-pools ran 1.2-2x slower in codes that shared their
// innermost strides.)
bool has_loop(const std::vector<Stmt>& body) {
  for (auto& s : body)
    if (s.kind == StmtKind::For || has_loop(s.body) || has_loop(s.else_body)) return true;
  return false;
}
bool innermost(const Stmt& s) { return s.kind == StmtKind::For && !s.annot.parallel && !has_loop(s.body); }
// Enters s's body: the depth inside it.
LoopDepth enter(LoopDepth d, const Stmt& s, int64_t min_trip) {
  if (s.kind != StmtKind::For) return d;
  ++d.loops;
  d.serial |= !s.annot.parallel;
  d.inner |= classed(min_trip) && innermost(s);
  return d;
}

// The names a parallel task computes once (the parallel loop's variable, the lets before any
// serial loop: plane, batch and band indices). In an innermost loop a literal multiplying
// one of them is a per-task base offset (c0 * C*H*W), hoisted out of the loop: it stays free,
// so the same layer at batch 1 and 64 or other channel counts still shares a code.
// More generally (kHoist only), a literal that is an operand of an expression the
// innermost loop does not change (it reads no variable of that loop, no let made in it, no
// memory) is free: the optimizer hoists that expression out of the loop (LICM), so the loop
// runs the same instructions with the value in a register instead of an immediate. A GEMM
// micro-kernel's `ir*KC` and `(pc*KC + m0/6)*M` are such: the K block and M of the layer
// then stay out of the key, while the strides of the loop's own variable (`kk*6`), the
// offsets added to them and the register indices stay constants.
struct TaskNames {
  std::unordered_set<std::string> names;
  std::unordered_set<std::string> inner;  // variables of innermost loops and lets made in them
  void saw(const Stmt& s, const LoopDepth& d) {
    if (!d.hot() && (s.kind == StmtKind::Let || (s.kind == StmtKind::For && s.annot.parallel))) names.insert(s.var);
    if ((d.inner && s.kind == StmtKind::Let) || innermost(s)) inner.insert(s.var);
  }
  // does e change inside the innermost loop?
  bool variant(const Expr& e) const {
    if (e.kind == ExprKind::Load || e.kind == ExprKind::LocalLoad || e.kind == ExprKind::Dot) return true;
    if (e.kind == ExprKind::Var) return inner.count(e.name) > 0;
    for (auto& a : e.args)
      if (a && variant(*a)) return true;
    return false;
  }
  // operand k of e, whose rule is r
  int64_t rule(const Expr& e, size_t k, const LoopDepth& d, int64_t r, int64_t min_trip) const {
    if (r != kNever || !d.inner || e.kind != ExprKind::Binary || e.args.size() != 2) return r;
    if ((e.op == Op::IDiv || e.op == Op::Mod) && k == 1) return r;  // a divisor stays
    if (min_trip == kHoist && !variant(e)) return kAny;
    if (e.op != Op::Mul) return r;
    const ExprRef& other = e.args[1 - k];
    return other && other->kind == ExprKind::Var && names.count(other->name) ? kAny : r;
  }
};

// A local array's size is no code: members of a group take the largest (registers excepted).
bool free_count(const Stmt& s) { return s.kind == StmtKind::Alloc && !s.registers; }

// One walk of a function in a fixed order: the key (structure, with '#' for each free
// literal) and the free literals' values in the same order.
class KeyWalk {
 public:
  explicit KeyWalk(int64_t min_trip = 32) : min_trip_(min_trip) {}
  std::string key;
  std::vector<int64_t> lits;
  std::vector<int64_t> counts;  // the sizes of local arrays (free_count), in walk order

  void func(const loop::LoopFunc& f) {
    key += "F";
    for (auto& b : f.buffers) key += "b" + std::to_string(static_cast<int>(b.dtype)) + (b.written ? "w" : "r");
    for (auto& d : f.dims) key += "d" + d + ";";
    stmts(f.body);
  }

 private:
  int64_t min_trip_;
  LoopDepth depth_;
  TaskNames task_;
  bool divisions_hot() const { return min_trip_ == kHoist ? depth_.inner : depth_.hot(); }
  void num(int64_t v) { key += std::to_string(v); key += ','; }
  void str(const std::string& s) { key += std::to_string(s.size()); key += ':'; key += s; }

  bool classes_ = false;  // inside a serial loop's extent, with min_trip kClasses
  void expr(const ExprRef& e, int64_t min_free) {
    if (!e) { key += '~'; return; }
    key += '(';
    num(static_cast<int>(e->kind));
    num(static_cast<int>(e->dtype));
    num(e->lanes);
    switch (e->kind) {
      case ExprKind::Const:
        if (is_float(e->dtype)) {
          uint64_t bits;
          std::memcpy(&bits, &e->f, sizeof bits);
          key += 'f';
          num(static_cast<int64_t>(bits));
        } else if (free_literal(*e, min_free)) {
          key += '#';
          if (classes_) key += size_class(e->i);
          lits.push_back(e->i);
        } else {
          num(e->i);
        }
        break;
      case ExprKind::Var: case ExprKind::LocalLoad: str(e->name); break;
      case ExprKind::Load: num(e->buffer); break;
      case ExprKind::Unary: case ExprKind::Binary: num(static_cast<int>(e->op)); break;
      default: break;
    }
    for (size_t k = 0; k < e->args.size(); ++k)
      expr(e->args[k], task_.rule(*e, k, depth_, operand_rule(*e, k, divisions_hot(), min_free), min_trip_));
    key += ')';
  }

  void stmts(const std::vector<Stmt>& body) {
    key += '{';
    for (auto& s : body) stmt(s);
    key += '}';
  }

  void stmt(const Stmt& s) {
    key += '[';
    num(static_cast<int>(s.kind));
    str(s.var);
    const int64_t any = depth_.inner ? kNever : kAny;
    classes_ = classed(min_trip_) && classed_extent(s);
    expr(s.extent, depth_.inner ? kNever : extent_rule(s, min_trip_));
    classes_ = false;
    expr(s.cond, any);
    expr(s.index, any);
    expr(s.value, any);
    num(s.buffer);
    num(static_cast<int>(s.dtype));
    num(s.lanes);
    if (free_count(s)) counts.push_back(s.count);
    else num(s.count);
    num(s.registers);
    if (s.kind == StmtKind::Prefetch) {
      num(s.write);
      num(s.locality);
    }
    num(s.annot.parallel);
    num(s.annot.vectorize);
    num(s.annot.unroll);
    if (s.annot.stride) key += "S" + std::to_string(s.annot.stride) + ',';  // (absent: keys as before)
    if (s.annot.max_trip) key += "T" + std::to_string(s.annot.max_trip) + ',';
    if (s.annot.transpose) key += "X,";
    if (s.annot.interleave) key += "I" + std::to_string(s.annot.interleave) + ',';
    for (auto& r : s.reduces) str(r);
    num(static_cast<int>(s.reduce_op));
    task_.saw(s, depth_);
    LoopDepth outer = depth_;
    depth_ = enter(depth_, s, min_trip_);
    stmts(s.body);
    depth_ = outer;
    stmts(s.else_body);
    key += ']';
  }
};

// The same walk, rebuilding the function with the free literals at the chosen positions
// replaced by variables.
class Rewrite {
 public:
  Rewrite(const std::vector<int>& param_of, const std::vector<int64_t>& counts, int64_t min_trip)
      : param_of_(param_of), counts_(counts), min_trip_(min_trip) {}

  void func(loop::LoopFunc& f) { stmts(f.body); }

 private:
  const std::vector<int>& param_of_;  // per free literal: -1 or its parameter number
  const std::vector<int64_t>& counts_;  // per free local array: its size in the generic code
  int64_t min_trip_;
  size_t pos_ = 0, count_pos_ = 0;
  LoopDepth depth_;
  TaskNames task_;
  bool divisions_hot() const { return min_trip_ == kHoist ? depth_.inner : depth_.hot(); }

 public:
  static std::string name(int k) { return "sp$" + std::to_string(k); }

 private:
  ExprRef expr(const ExprRef& e, int64_t min_free) {
    if (!e) return e;
    if (free_literal(*e, min_free)) {
      int p = param_of_.at(pos_++);
      return p < 0 ? e : loop::var(name(p), DType::I64);
    }
    std::vector<ExprRef> args;
    bool changed = false;
    args.reserve(e->args.size());
    for (size_t k = 0; k < e->args.size(); ++k) {
      args.push_back(expr(e->args[k], task_.rule(*e, k, depth_, operand_rule(*e, k, divisions_hot(), min_free), min_trip_)));
      changed |= args.back() != e->args[k];
    }
    if (!changed) return e;
    auto n = std::make_shared<Expr>(*e);  // no re-simplification: the same tree, other leaves
    n->args = std::move(args);
    return n;
  }

  void stmts(std::vector<Stmt>& body) {
    for (auto& s : body) stmt(s);
  }

  void stmt(Stmt& s) {
    const int64_t any = depth_.inner ? kNever : kAny;
    s.extent = expr(s.extent, depth_.inner ? kNever : extent_rule(s, min_trip_));
    s.cond = expr(s.cond, any);
    s.index = expr(s.index, any);
    s.value = expr(s.value, any);
    if (free_count(s)) s.count = counts_.at(count_pos_++);
    task_.saw(s, depth_);
    LoopDepth outer = depth_;
    depth_ = enter(depth_, s, min_trip_);
    stmts(s.body);
    depth_ = outer;
    stmts(s.else_body);
  }
};

}  // namespace

std::string shape_param_key(const loop::LoopFunc& f, int64_t min_trip) {
  KeyWalk w(min_trip);
  w.func(f);
  return std::move(w.key);
}

size_t ShapeParamPlan::grouped() const {
  std::vector<int> members(codes.size(), 0);
  for (int c : code) ++members[c];
  size_t n = 0;
  for (int c : code) n += members[c] > 1;
  return n;
}

ShapeParamPlan plan_shape_params(const std::vector<const loop::LoopFunc*>& funcs, size_t min_group, int64_t min_trip) {
  ShapeParamPlan plan;
  if (min_group == SIZE_MAX) {  // off: each function its own code, no walk
    for (size_t i = 0; i < funcs.size(); ++i) {
      plan.codes.push_back(*funcs[i]);
      plan.code.push_back(static_cast<int>(i));
      plan.values.emplace_back();
      plan.first_param.push_back(funcs[i]->dims.size());
      plan.bounds.emplace_back();
    }
    return plan;
  }
  std::vector<KeyWalk> walks(funcs.size(), KeyWalk(min_trip));
  std::unordered_map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < funcs.size(); ++i) {
    walks[i].func(*funcs[i]);
    groups[walks[i].key].push_back(i);
  }
  plan.code.assign(funcs.size(), -1);
  plan.values.assign(funcs.size(), {});
  for (size_t i = 0; i < funcs.size(); ++i) {
    if (plan.code[i] >= 0) continue;
    const std::vector<size_t>& g = groups.at(walks[i].key);
    const int c = static_cast<int>(plan.codes.size());
    plan.codes.push_back(*funcs[i]);
    plan.first_param.push_back(funcs[i]->dims.size());
    plan.bounds.emplace_back();
    if (g.size() < std::max<size_t>(min_group, 2)) {
      plan.code[i] = c;
      continue;
    }
    // the literals the members disagree on become parameters, numbered in walk order
    const size_t n = walks[i].lits.size();
    // (places where every member has the same value as at an earlier place share its
    // parameter: one stride, one extent, as the optimizer would have seen them as constants)
    std::vector<int> param_of(n, -1);
    int params = 0;
    std::map<std::vector<int64_t>, int> param_by_values;
    std::vector<int64_t> column(g.size());
    for (size_t p = 0; p < n; ++p) {
      bool varies = false;
      for (size_t m = 0; m < g.size(); ++m) {
        column[m] = walks[g[m]].lits[p];
        varies |= column[m] != column[0];
      }
      if (!varies) continue;
      auto [it, fresh] = param_by_values.try_emplace(column, params);
      params += fresh;
      param_of[p] = it->second;
    }
    std::vector<int64_t> counts = walks[i].counts;
    for (size_t j : g)
      for (size_t a = 0; a < counts.size(); ++a) counts[a] = std::max(counts[a], walks[j].counts[a]);
    loop::LoopFunc& generic = plan.codes.back();
    Rewrite(param_of, counts, min_trip).func(generic);
    for (int k = 0; k < params; ++k) generic.dims.push_back(Rewrite::name(k));
    plan.bounds.back().assign(params, {INT64_MAX, INT64_MIN});
    for (size_t j : g) {
      plan.code[j] = c;
      plan.values[j].assign(params, 0);
      for (size_t p = 0; p < n; ++p)
        if (param_of[p] >= 0) plan.values[j][param_of[p]] = walks[j].lits[p];
      for (int k = 0; k < params; ++k) {
        auto& [lo, hi] = plan.bounds.back()[k];
        lo = std::min(lo, plan.values[j][k]);
        hi = std::max(hi, plan.values[j][k]);
      }
    }
  }
  return plan;
}

}  // namespace lathe
