// lower.cpp — lower_kernel: one fused kernel → loop IR (see lower.h for the scheme).
#include "core/loop/lower.h"

#include <functional>
#include <limits>
#include <set>
#include <unordered_set>

#include "core/ir/diag.h"
#include "core/loop/lower_depthwise.h"
#include "core/loop/lower_value.h"
#include "core/runtime/host_tensor.h"

namespace lathe::loop {

namespace {

// One loop level under construction: its statements, then (implicitly) the next level.
struct Scope {
  std::string var;   // "" for the kernel's top level
  ExprRef extent;
  std::string note;
  std::vector<Stmt> stmts;
};

ExprRef reduce_identity(ReduceOp r, DType dt) {
  switch (r) {
    case ReduceOp::Add: return const_of(0, dt);
    case ReduceOp::Mul: return const_of(1, dt);
    case ReduceOp::Max:
      if (is_float(dt)) return const_float(-std::numeric_limits<double>::infinity(), dt);
      switch (dt) {
        case DType::Bool: case DType::U8: case DType::U16: case DType::U32: case DType::U64: return const_int(0, dt);
        case DType::I8: return const_int(-128, dt);
        case DType::I16: return const_int(-32768, dt);
        case DType::I32: return const_int(std::numeric_limits<int32_t>::min(), dt);
        default: return const_int(std::numeric_limits<int64_t>::min(), dt);
      }
  }
  return const_of(0, dt);
}

// Bool reductions are logical: add and max are "or", mul is "and" (as the interpreter does).
Op combine_op(ReduceOp r, DType dt) {
  if (dt == DType::Bool) return r == ReduceOp::Mul ? Op::And : Op::Or;
  return r == ReduceOp::Add ? Op::Add : r == ReduceOp::Mul ? Op::Mul : Op::Max;
}

// Does an expression contain work worth a store and a load to avoid recomputing
// (a transcendental op)? Cheap arithmetic is recomputed instead.
bool expensive(const ExprRef& e) {
  if (e->kind == ExprKind::Unary && (e->op == Op::Exp2 || e->op == Op::Log2 || e->op == Op::Sin)) return true;
  for (auto& a : e->args)
    if (expensive(a)) return true;
  return false;
}

class Lowerer : public ValueLowering {
 public:
  // allow_stash: may keep one shared expensive value in the output buffer (see stash_at)
  Lowerer(const KernelGraph& kg, const Kernel& k, bool allow_stash)
      : ValueLowering(kg, k.root), k_(k), allow_stash_(allow_stash) {
    f_.name = k.name;
    f_.kernel = k.id;
    f_.dims = kg.symbols;
    f_.kind = k.kind;
    add_param(k.output, true);
    for (int b : k.inputs) add_param(b, false);
    std::unordered_set<NodeRef> inside(k.nodes.begin(), k.nodes.end());
    for (NodeRef n : k.nodes)
      for (NodeRef in : n->inputs)
        if (inside.count(in)) uses_[in]++;
  }

  bool stash_unused() const { return stash_node_ && !stash_read_; }

  LoopFunc run() {
    NodeRef root = k_.root;
    const Shape& shape = root->shape;
    scopes_.push_back(std::make_unique<Scope>());
    stack_.push_back(scopes_.back().get());
    Index idx;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == SymInt(1)) { idx.push_back(const_int(0)); continue; }
      std::string v = "i" + std::to_string(d);
      push_scope(v, from_sym(shape[d]), "output dim " + std::to_string(d));
      idx.push_back(var(v));
    }
    root_idx_ = idx;
    root_idx_key_ = idx_key(idx);
    ExprRef value = compute(root, idx);
    stack_.back()->stmts.push_back(make_store(0, row_major_index(idx, shape), value));
    f_.body = close_scopes(stack_, 0);
    return std::move(f_);
  }

 private:
  const Kernel& k_;
  LoopFunc f_;
  std::unordered_map<NodeRef, int> uses_;          // users inside the kernel
  std::vector<std::unique_ptr<Scope>> scopes_;
  std::vector<Scope*> stack_;
  std::unordered_map<std::string, Scope*> defined_in_;   // loop var / local -> scope
  std::unordered_map<std::string, std::pair<Scope*, std::string>> cse_;
  int counter_ = 0;
  // the stash: one shared node whose values a reduction loop stores into the output row
  // and the output loop loads back instead of recomputing (softmax's exp(x - max))
  bool allow_stash_ = false;
  Index root_idx_;
  std::string root_idx_key_;              // idx_key(root_idx_)
  NodeRef stash_node_ = nullptr;
  bool stash_read_ = false;
  std::unordered_set<std::string> reduce_vars_;
  std::unordered_map<NodeRef, int> reduce_depth_;
  std::unordered_map<std::string, std::string> bound_;   // scope address + expr key -> local

  void add_param(int buffer, bool written) {
    const BufferDesc& b = kg_.buffers[buffer];
    BufferParam p;
    p.buffer = buffer;
    p.name = written ? "out" : "in" + std::to_string(f_.buffers.size() - 1);
    p.dtype = b.dtype;
    p.written = written;
    param_of_[buffer] = (int)f_.buffers.size();
    f_.buffers.push_back(p);
  }

  void push_scope(const std::string& v, ExprRef extent, std::string note) {
    auto s = std::make_unique<Scope>();
    s->var = v;
    s->extent = std::move(extent);
    s->note = std::move(note);
    defined_in_[v] = s.get();
    stack_.push_back(s.get());
    scopes_.push_back(std::move(s));
  }

  // Folds scopes [from, end) of `st` into nested For statements; returns scope `from`'s body.
  std::vector<Stmt> close_scopes(const std::vector<Scope*>& st, size_t from,
                                 const std::string& acc = "", ReduceOp rop = ReduceOp::Add) {
    std::vector<Stmt> body = std::move(st.back()->stmts);
    for (size_t l = st.size() - 1; l > from; --l) {
      Stmt loop = make_for(st[l]->var, st[l]->extent, std::move(body), st[l]->note);
      if (!acc.empty()) {
        loop.reduces = {acc};
        loop.reduce_op = rop;
      }
      body = std::move(st[l - 1]->stmts);
      body.push_back(std::move(loop));
    }
    return body;
  }

  // Deepest position in the current stack among the variables an expression uses.
  size_t depth_of(const ExprRef& e) {
    size_t d = 0;
    std::function<void(const ExprRef&)> visit = [&](const ExprRef& x) {
      if (x->kind == ExprKind::Var) {
        auto it = defined_in_.find(x->name);
        if (it != defined_in_.end()) {
          for (size_t p = 0; p < stack_.size(); ++p)
            if (stack_[p] == it->second) d = std::max(d, p);
        }
      }
      for (auto& a : x->args) visit(a);
    };
    visit(e);
    return d;
  }

  bool in_stack(Scope* s) const {
    for (Scope* x : stack_)
      if (x == s) return true;
    return false;
  }

  static std::string idx_key(const Index& idx) {
    std::string k;
    for (auto& e : idx) k += expr_key(e) + ";";
    return k;
  }

  std::string key_of(NodeRef n, const Index& idx) {
    return std::to_string(n->id) + "@" + idx_key(idx) + "|" + expr_key(mask());
  }

  // How deeply fused reductions nest inside n (0: none; softmax's sum of exp(x - max): 2).
  int reduce_depth(NodeRef n) {
    if (reads_buffer(n)) return 0;
    auto it = reduce_depth_.find(n);
    if (it != reduce_depth_.end()) return it->second;
    int d = 0;
    for (NodeRef in : n->inputs) d = std::max(d, reduce_depth(in));
    return reduce_depth_[n] = d + (n->op == Op::Reduce);
  }

  // The values of n's inputs at idx, in a fixed order: deepest reduction nesting first
  // (ties in input order). A reduction's loop then comes before the code that shares its
  // subexpressions, so a stash it makes (stash_at) is there for the others to read.
  std::vector<ExprRef> operands(NodeRef n, const Index& idx) override {
    std::vector<size_t> order(n->inputs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return reduce_depth(n->inputs[a]) > reduce_depth(n->inputs[b]); });
    std::vector<ExprRef> v(n->inputs.size());
    for (size_t i : order) v[i] = value(n->inputs[i], idx);
    return v;
  }

  ExprRef bind(const std::string& prefix, DType dt, ExprRef e, size_t depth) {
    // the same expression already bound in this scope (from another index path): reuse it
    std::string same = std::to_string(reinterpret_cast<uintptr_t>(stack_[depth])) + ":" +
                       std::string(dtype_name(dt)) + ":" + expr_key(e);
    if (auto it = bound_.find(same); it != bound_.end()) return var(it->second, dt);
    std::string name = prefix + std::to_string(counter_++);
    bound_[same] = name;
    stack_[depth]->stmts.push_back(make_let(name, dt, e));
    defined_in_[name] = stack_[depth];
    return var(name, dt);
  }

  ExprRef value(NodeRef n, const Index& idx) override {
    if (reads_buffer(n)) return load_buffer(n, idx);
    std::string key = key_of(n, idx);
    auto it = cse_.find(key);
    if (it != cse_.end() && in_stack(it->second.first)) return var(it->second.second, n->dtype);
    ExprRef e = stashed(n, idx);
    if (!e) e = compute(n, idx);
    if (e->kind == ExprKind::Var) {  // a reduction's accumulator (or a bound local): reuse it
      auto def = defined_in_.find(e->name);
      if (def != defined_in_.end()) cse_[key] = {def->second, e->name};
      return e;
    }
    if (e->kind == ExprKind::Const) return e;
    size_t depth = depth_of(e);
    bool shared = uses_[n] > 1;
    bool hoistable = depth + 1 < stack_.size();
    if (!shared && !hoistable) return e;
    ExprRef v = bind("v", n->dtype, e, depth);
    cse_[key] = {stack_[depth], v->name};
    if (shared && e->kind != ExprKind::Load && stash_at(n, idx, e))
      stack_.back()->stmts.push_back(make_store(0, row_major_index(idx, n->shape), v));
    return v;
  }

  // Should node n's value at idx (inside a reduction loop) be stored into the output buffer
  // at the matching position? Only when: it is expensive and shared, n has the root's shape
  // and dtype (a full-precision float, not stored rounded), no mask guards it, the output
  // buffer is not also an input, and idx is the root's output index with some output loop
  // vars (not yet open) replaced by reduction vars spanning the same extent. Then the
  // reduction loop writes every element of the output row before the output loop runs,
  // and the output loop reads each element back exactly where (and before) it stores it.
  bool stash_at(NodeRef n, const Index& idx, const ExprRef& e) {
    NodeRef root = k_.root;
    if (!allow_stash_ || stash_node_ || n == root || !expensive(e) || mask()) return false;
    if (n->dtype != root->dtype || !is_float(n->dtype) || n->dtype == DType::F16 || n->dtype == DType::BF16) return false;
    if (n->shape != root->shape || idx.size() != root_idx_.size()) return false;
    for (size_t p = 1; p < f_.buffers.size(); ++p)
      if (f_.buffers[p].buffer == f_.buffers[0].buffer) return false;
    std::unordered_set<std::string> used;
    bool swapped = false;
    for (size_t d = 0; d < idx.size(); ++d) {
      const ExprRef& want = root_idx_[d];
      bool open = want->kind == ExprKind::Var && in_stack(defined_in_.at(want->name));
      if (expr_key(idx[d]) == expr_key(want)) {
        if (want->kind == ExprKind::Var && !open) return false;
        continue;
      }
      const ExprRef& got = idx[d];
      if (want->kind != ExprKind::Var || open || got->kind != ExprKind::Var || !reduce_vars_.count(got->name)) return false;
      Scope* s = defined_in_.at(got->name);
      if (!in_stack(s) || expr_key(s->extent) != expr_key(from_sym(root->shape[d])) || !used.insert(got->name).second)
        return false;
      swapped = true;
    }
    if (!swapped) return false;
    stash_node_ = n;
    return true;
  }

  // The stashed node at the root's own index: load it back from the output buffer.
  ExprRef stashed(NodeRef n, const Index& idx) {
    if (n != stash_node_ || mask() || idx_key(idx) != root_idx_key_) return nullptr;
    stash_read_ = true;
    return load(0, n->dtype, row_major_index(idx, n->shape));
  }

  // The ops ValueLowering leaves to this lowering: gathers, copies and fused reductions.
  ExprRef compute_other(NodeRef n, const Index& idx) override {
    switch (n->op) {
      case Op::Take: return take_value(n, idx);
      case Op::Copy: return value(n->inputs[0], idx);
      case Op::Assign: return value(n->inputs[1], idx);
      case Op::Reduce: return reduce_value(n, idx);
      default: return ValueLowering::compute_other(n, idx);
    }
  }

  // The range [lo, hi] of constant integer indices (read through views: a masked view adds
  // its 0), e.g. the source rows of a Resize or an embedding's ids folded in; nullopt else.
  static std::optional<std::pair<int64_t, int64_t>> const_index_range(NodeRef i) {
    bool zero = false;
    for (; i->op == Op::View; i = i->inputs[0]) zero |= i->attrs.view->has_mask();
    if (i->op != Op::Const || !i->attrs.data || !is_int(i->dtype)) return std::nullopt;
    const HostTensor& d = *i->attrs.data;
    if (d.numel() == 0 || d.numel() > (int64_t(1) << 22)) return std::nullopt;  // keep the build quick
    int64_t lo = zero ? 0 : d.get_i64(0), hi = lo;
    for (int64_t k = 0; k < d.numel(); ++k) {
      lo = std::min(lo, d.get_i64(k));
      hi = std::max(hi, d.get_i64(k));
    }
    return std::make_pair(lo, hi);
  }

  ExprRef take_value(NodeRef n, const Index& idx) {
    NodeRef x = n->inputs[0];
    int axis = n->attrs.axis;
    ExprRef dim = from_sym(x->shape[axis]);
    // constant indices known to be in range: no wrap of negatives, no bounds check (a
    // gather the vectorizer can keep as plain indexed loads)
    if (x->shape[axis].is_const()) {
      auto r = const_index_range(n->inputs[1]);
      if (r && r->first >= 0 && r->second < x->shape[axis].value()) {
        Index in_idx = idx;
        ExprRef raw = cast(value(n->inputs[1], idx), DType::I64);
        in_idx[axis] = bind("t", DType::I64, raw, depth_of(raw));
        return value(x, in_idx);
      }
    }
    ExprRef raw = cast(value(n->inputs[1], idx), DType::I64);
    ExprRef pos = bind("t", DType::I64, select(lt(raw, const_int(0)), add(raw, dim), raw), depth_of(raw));
    ExprRef ok = logical_and(le(const_int(0), pos), lt(pos, dim));
    Index in_idx = idx;
    in_idx[axis] = pos;
    return guarded(ok, x, in_idx, n->dtype);
  }

  ExprRef reduce_value(NodeRef r, const Index& idx) {
    NodeRef in = r->inputs[0];
    const auto& axes = r->attrs.axes;
    auto is_axis = [&](size_t d) { return std::find(axes.begin(), axes.end(), (int)d) != axes.end(); };
    // where does the reduced value live? the deepest loop its kept indices use
    size_t depth = 0;
    std::vector<bool> used(stack_.size(), false);  // loop levels whose variable it uses
    std::function<void(const ExprRef&)> mark = [&](const ExprRef& x) {
      if (x->kind == ExprKind::Var)
        for (size_t p = 0; p < stack_.size(); ++p)
          if (stack_[p]->var == x->name) used[p] = true;
      for (auto& a : x->args) mark(a);
    };
    for (size_t d = 0; d < idx.size(); ++d) {
      if (is_axis(d)) continue;
      depth = std::max(depth, depth_of(idx[d]));
      mark(idx[d]);
    }
    // loads inside the reduction carry the consumer's masks (they guard out-of-range
    // coordinates), so the reduction cannot be placed above the variables those use
    if (ExprRef m = mask()) {
      depth = std::max(depth, depth_of(m));
      mark(m);
    }
    for (size_t p = 1; p <= depth; ++p)
      if (!used[p] && !is_const(stack_[p]->extent, 1) && r != k_.root)
        throw NeedsMaterialize{r, "its index does not depend on loop " + stack_[p]->var +
                                      ", so fusing it would recompute it on every iteration"};
    Index in_idx = idx;
    std::vector<Scope*> saved = stack_;
    stack_.resize(depth + 1);
    size_t base = stack_.size();
    for (size_t d = 0; d < in->shape.size(); ++d) {
      if (!is_axis(d)) continue;
      if (in->shape[d] == SymInt(1)) { in_idx[d] = const_int(0); continue; }
      std::string v = "r" + std::to_string(counter_++);
      push_scope(v, from_sym(in->shape[d]), "reduce axis " + std::to_string(d));
      reduce_vars_.insert(v);
      in_idx[d] = var(v);
    }
    ExprRef x = value(in, in_idx);
    if (stack_.size() == base) {  // every reduced axis has size 1
      stack_ = saved;
      return x;
    }
    std::string acc = "acc" + std::to_string(counter_++);
    ExprRef accv = var(acc, r->dtype);
    stack_.back()->stmts.push_back(make_assign(acc, binary(combine_op(r->attrs.reduce, r->dtype), accv, x)));
    std::vector<Scope*> nest(stack_.begin() + (base - 1), stack_.end());
    std::vector<Stmt> outer_stmts = std::move(nest[0]->stmts);
    nest[0]->stmts.clear();
    std::vector<Stmt> loops = close_scopes(nest, 0, acc, r->attrs.reduce);
    stack_ = saved;
    Scope* target = stack_[depth];
    target->stmts = std::move(outer_stmts);
    target->stmts.push_back(make_let(acc, r->dtype, reduce_identity(r->attrs.reduce, r->dtype)));
    for (auto& s : loops) target->stmts.push_back(std::move(s));
    defined_in_[acc] = target;
    return accv;
  }
};

}  // namespace

LoopFunc lower_kernel(const KernelGraph& kg, int kernel, bool plain) {
  const Kernel& k = kg.kernels.at(kernel);
  if (k.kind == "matmul" && !plain) {  // a stem convolution: the direct nest (lower_depthwise.h); else the packed GEMM
    if (auto f = lower_depthwise_kernel(kg, kernel, host_matmul_params().lanes)) return std::move(*f);
    MatmulParams P = host_matmul_params();
    if (auto mm = match_matmul(k.matmul ? k.matmul : k.root)) P = conv_matmul_params(*mm, P);  // (a convolution's tile)
    return lower_matmul_kernel(kg, kernel, fit_matmul_rows(kg, kernel, P));
  }
  if (k.kind == "attention") {  // plain: one query row per iteration (the GPU's form)
    AttentionParams ap = host_attention_params();
    if (plain) ap.bq = 1, ap.bk = 8, ap.mr = 1, ap.vector = false;
    return lower_attention_kernel(kg, kernel, ap);
  }
  if (k.kind == "attention_bwd") {
    AttentionParams ap = host_attention_params();
    if (plain) ap.bq = 1, ap.bk = 1, ap.mr = 1, ap.vector = false;
    return lower_attention_bwd_kernel(kg, kernel, ap);
  }
  LATHE_CHECK(k.kind != "extern", "extern kernels have no loop IR; the backend calls the library");
  if (!plain)  // a depthwise convolution: the direct vectorized nest (lower_depthwise.h)
    if (auto f = lower_depthwise_kernel(kg, kernel, host_matmul_params().lanes)) return std::move(*f);
  Kernel as_reduce = k;  // a plain matmul: the reduction (and epilogue) as any fused reduce
  if (k.kind == "matmul") as_reduce.kind = "reduce";
  // a stash that no output loop read back would be a wasted store: lower again without it
  Lowerer l(kg, as_reduce, true);
  LoopFunc f = l.run();
  if (l.stash_unused()) f = Lowerer(kg, as_reduce, false).run();
  f.kind = k.kind;
  unique_loop_names(f);
  return f;
}

bool is_packed_matmul(const LoopFunc& f) {
  return f.kind == "matmul" && !f.schedule_log.empty() && f.schedule_log.front().rfind("matmul: ", 0) == 0;
}

void rename_loops(std::vector<Stmt>& body, const std::string& from, const std::string& to) {
  ExprRef v = var(to);
  std::function<void(std::vector<Stmt>&, bool)> visit = [&](std::vector<Stmt>& b, bool in_scope) {
    for (Stmt& s : b) {
      if (in_scope)
        for (auto* e : {&s.extent, &s.cond, &s.index, &s.value})
          if (*e) *e = substitute(*e, from, v);
      bool renamed = s.kind == StmtKind::For && s.var == from;
      if (renamed) s.var = to;
      // inside a renamed loop `from` means it; inside another loop of that name (none
      // left after renaming) it would be shadowed
      visit(s.body, in_scope || renamed);
      visit(s.else_body, in_scope || renamed);
    }
  };
  visit(body, false);
}

void unique_loop_names(LoopFunc& f) {
  std::set<std::string> used, loops;
  walk(f.body, [&](const Stmt& s) {
    if (!s.var.empty()) used.insert(s.var);
    return true;
  });
  for (auto& b : f.buffers) used.insert(b.name);
  for (auto& d : f.dims) used.insert(d);
  std::function<void(std::vector<Stmt>&)> visit = [&](std::vector<Stmt>& body) {
    for (Stmt& s : body) {
      if (s.kind == StmtKind::For && !loops.insert(s.var).second) {
        std::string n;
        for (int i = 2; used.count(n = s.var + std::to_string(i)); ++i) {
        }
        used.insert(n);
        loops.insert(n);
        std::string old_name = s.var;  // (a copy: rename_loops changes s.var)
        std::vector<Stmt> one{std::move(s)};
        rename_loops(one, old_name, n);
        s = std::move(one[0]);
      }
      visit(s.body);
      visit(s.else_body);
    }
  };
  visit(f.body);
}

}  // namespace lathe::loop
