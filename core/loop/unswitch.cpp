// unswitch.cpp — loop unswitching of conditions on one loop variable (see unswitch.h).
#include "core/loop/unswitch.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace lathe::loop {

namespace {

// Whether e reads nothing but constants and the variable v (no loads, no other variables).
bool only_var(const ExprRef& e, const std::string& v) {
  if (!e) return true;
  switch (e->kind) {
    case ExprKind::Const: return true;
    case ExprKind::Var: return e->name == v;
    case ExprKind::Load:
    case ExprKind::LocalLoad:
    case ExprKind::Dot: return false;
    default:
      for (auto& a : e->args)
        if (!only_var(a, v)) return false;
      return true;
  }
}

int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

// The value of an integer / bool expression over v at v = x (as the builders fold constants);
// nullopt where it is not one this evaluator knows.
std::optional<int64_t> eval(const ExprRef& e, const std::string& v, int64_t x) {
  if (e->lanes != 1 || is_float(e->dtype)) return std::nullopt;
  auto arg = [&](size_t i) { return eval(e->args[i], v, x); };
  switch (e->kind) {
    case ExprKind::Const: return e->i;
    case ExprKind::Var: return e->name == v ? std::optional<int64_t>(x) : std::nullopt;
    case ExprKind::Unary: {
      auto a = arg(0);
      if (!a) return std::nullopt;
      if (e->op == Op::Not) return static_cast<int64_t>(*a == 0);
      if (e->op == Op::Neg) return wrap_mul(*a, -1);
      return std::nullopt;
    }
    case ExprKind::Binary: {
      auto a = arg(0), b = arg(1);
      if (!a || !b) return std::nullopt;
      switch (e->op) {
        case Op::Add: return wrap_add(*a, *b);
        case Op::Mul: return wrap_mul(*a, *b);
        case Op::IDiv: if (*b == 0 || *b == -1) return std::nullopt; return *a / *b;
        case Op::Mod: if (*b == 0 || *b == -1) return std::nullopt; return *a % *b;
        case Op::Max: return std::max(*a, *b);
        case Op::CmpLT: return static_cast<int64_t>(*a < *b);
        case Op::CmpNE: return static_cast<int64_t>(*a != *b);
        case Op::And: return e->dtype == DType::Bool ? static_cast<int64_t>(*a && *b) : (*a & *b);
        case Op::Or: return e->dtype == DType::Bool ? static_cast<int64_t>(*a || *b) : (*a | *b);
        case Op::Xor: return e->dtype == DType::Bool ? static_cast<int64_t>((*a != 0) != (*b != 0)) : (*a ^ *b);
        default: return std::nullopt;
      }
    }
    case ExprKind::Select: {
      auto c = arg(0);
      if (!c) return std::nullopt;
      return *c ? arg(1) : arg(2);
    }
    case ExprKind::Cast: {
      auto a = arg(0);
      if (!a || is_float(e->args[0]->dtype)) return std::nullopt;
      if (e->dtype == DType::Bool) return static_cast<int64_t>(*a != 0);
      if (e->dtype == DType::I64) return a;
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

// The distinct bool conditions over v alone (by structural key) in the statements' expressions.
void collect(const ExprRef& e, const std::string& v, std::map<std::string, ExprRef>& out) {
  if (!e || e->kind == ExprKind::Const || !mentions(e, v)) return;
  if (e->dtype == DType::Bool && e->lanes == 1 && only_var(e, v)) {
    out.emplace(expr_key(e), e);
    return;  // its parts fold with it
  }
  for (auto& a : e->args) collect(a, v, out);
}

// e with every condition of `truth` (by key) replaced by its constant, simplified.
ExprRef fold(const ExprRef& e, const std::string& v, const std::unordered_map<std::string, bool>& truth) {
  if (!e || e->kind == ExprKind::Const || !mentions(e, v)) return e;
  if (e->dtype == DType::Bool && e->lanes == 1 && only_var(e, v)) {
    auto it = truth.find(expr_key(e));
    if (it != truth.end()) return const_int(it->second ? 1 : 0, DType::Bool);
  }
  std::vector<ExprRef> args;
  args.reserve(e->args.size());
  for (auto& a : e->args) args.push_back(fold(a, v, truth));
  return with_args(e, std::move(args));
}

void fold_stmts(std::vector<Stmt>& body, const std::string& v, const std::unordered_map<std::string, bool>& truth) {
  std::vector<Stmt> out;
  out.reserve(body.size());
  for (auto& s : body) {
    for (auto* e : {&s.extent, &s.cond, &s.index, &s.value})
      if (*e) *e = fold(*e, v, truth);
    fold_stmts(s.body, v, truth);
    fold_stmts(s.else_body, v, truth);
    if (s.kind == StmtKind::If && is_const(s.cond)) {  // a decided branch: its statements in place
      for (auto& t : s.cond->i ? s.body : s.else_body) out.push_back(std::move(t));
      continue;
    }
    out.push_back(std::move(s));
  }
  body = std::move(out);
}

size_t count_stmts(const std::vector<Stmt>& body) {
  size_t n = 0;
  walk(body, [&](const Stmt&) { ++n; return true; });
  return n;
}

bool has_inner_loop(const Stmt& s) {
  bool inner = false;
  walk(s.body, [&](const Stmt& c) { inner |= c.kind == StmtKind::For; return !inner; });
  return inner;
}

struct Unswitcher {
  LoopFunc& f;
  size_t budget;  // statements the kernel may still grow by
  int changed = 0;

  // The if-tree over `conds` that picks one of `versions` (indices into `sig`), with each
  // leaf a copy of `body` folded for its version.
  std::vector<Stmt> tree(const std::vector<Stmt>& body, const std::string& v, const std::vector<ExprRef>& conds,
                         const std::vector<std::string>& keys, const std::vector<std::vector<bool>>& sig,
                         const std::vector<int>& versions) {
    if (versions.size() == 1) {
      std::unordered_map<std::string, bool> truth;
      for (size_t k = 0; k < conds.size(); ++k) truth[keys[k]] = sig[static_cast<size_t>(versions[0])][k];
      std::vector<Stmt> copy = body;
      fold_stmts(copy, v, truth);
      return copy;
    }
    // the smallest condition that splits the versions
    size_t best = conds.size(), best_size = 0;
    for (size_t k = 0; k < conds.size(); ++k) {
      bool t = false, fl = false;
      for (int ver : versions) (sig[static_cast<size_t>(ver)][k] ? t : fl) = true;
      if (t && fl && (best == conds.size() || keys[k].size() < best_size)) { best = k; best_size = keys[k].size(); }
    }
    std::vector<int> yes, no;
    for (int ver : versions) (sig[static_cast<size_t>(ver)][best] ? yes : no).push_back(ver);
    return {make_if(conds[best], tree(body, v, conds, keys, sig, yes), tree(body, v, conds, keys, sig, no))};
  }

  void loop(Stmt& s) {
    if (s.kind != StmtKind::For || !is_const(s.extent) || s.extent->i < 1 || s.extent->i > kUnswitchScan ||
        !has_inner_loop(s))
      return;
    const std::string& v = s.var;
    std::map<std::string, ExprRef> found;
    walk_exprs(s.body, [&](const ExprRef& e) { collect(e, v, found); });
    std::vector<ExprRef> conds;
    std::vector<std::string> keys;
    for (auto& [k, e] : found)
      if (eval(e, v, 0)) { keys.push_back(k); conds.push_back(e); }
    if (conds.empty()) return;
    // the versions: distinct tuples of truths over the loop's values
    std::vector<std::vector<bool>> sig;
    std::map<std::vector<bool>, int> index;
    for (int64_t x = 0; x < s.extent->i; ++x) {
      std::vector<bool> t(conds.size());
      for (size_t k = 0; k < conds.size(); ++k) {
        auto r = eval(conds[k], v, x);
        if (!r) return;
        t[k] = *r != 0;
      }
      if (index.emplace(t, static_cast<int>(sig.size())).second) sig.push_back(std::move(t));
      if (static_cast<int>(sig.size()) > kUnswitchVersions) return;
    }
    size_t size = count_stmts(s.body), grow = size * (sig.size() - 1) + (sig.size() - 1);
    if (grow > budget) return;
    budget -= grow;
    std::vector<int> all;
    for (size_t i = 0; i < sig.size(); ++i) all.push_back(static_cast<int>(i));
    s.body = tree(s.body, v, conds, keys, sig, all);
    f.schedule_log.push_back("unswitch " + v + " (" + std::to_string(sig.size()) + " version" +
                             (sig.size() == 1 ? "" : "s") + ")");
    ++changed;
  }

  // outer loops first, then the loops inside each copy
  void run(std::vector<Stmt>& body) {
    for (auto& s : body) {
      loop(s);
      run(s.body);
      run(s.else_body);
    }
  }
};

}  // namespace

int unswitch_invariant_guards(LoopFunc& f) {
  if (const char* e = std::getenv("LATHE_UNSWITCH"); e && std::string(e) == "0") return 0;
  size_t n = count_stmts(f.body);
  Unswitcher u{f, n * static_cast<size_t>(kUnswitchGrowth - 1)};
  u.run(f.body);
  return u.changed;
}

}  // namespace lathe::loop
