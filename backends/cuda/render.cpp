// render.cpp — CUDA C statements and the thread mapping of a kernel (see render.h).
//
// [SECTION] mapping analysis: which loops become threads, blocks, or a block reduction
// [SECTION] statement emitter
// [SECTION] render(): the kernel function
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>

#include "backends/cuda/emitter.h"
#include "core/ir/diag.h"
#include "core/loop/cost.h"
#include "core/loop/loop_print.h"

namespace lathe::cuda {

using loop::ExprRef;
using loop::Stmt;
using loop::StmtKind;

namespace {

// ---- [SECTION] mapping analysis -------------------------------------------------------

bool is_half(DType dt) { return dt == DType::F16 || dt == DType::BF16; }
const Stmt* only_for(const std::vector<Stmt>& body) {
  return body.size() == 1 && body[0].kind == StmtKind::For ? &body[0] : nullptr;
}
bool has_loop(const std::vector<Stmt>& body) {
  bool any = false;
  loop::walk(body, [&](const Stmt& s) { any |= s.kind == StmtKind::For; return !any; });
  return any;
}
bool has_kind(const std::vector<Stmt>& body, StmtKind k) {
  bool any = false;
  loop::walk(body, [&](const Stmt& s) { any |= s.kind == k; return !any; });
  return any;
}

// Does a kernel write a buffer it also reads (an Assign in place)? Then only loops the
// schedule proved parallel may be spread over threads.
bool aliases(const loop::LoopFunc& f) {
  for (size_t i = 0; i < f.buffers.size(); ++i)
    for (size_t j = 0; j < f.buffers.size(); ++j)
      if (i != j && f.buffers[i].buffer == f.buffers[j].buffer && (f.buffers[i].written || f.buffers[j].written)) return true;
  return false;
}

// The loop a body nests next: its only statement, or (output loops) its last statement
// after Lets, which are loop-invariant values the renderer recomputes inside the nest.
const Stmt* next_for(const std::vector<Stmt>& body, bool reduction) {
  if (reduction) return only_for(body);
  if (body.empty() || body.back().kind != StmtKind::For) return nullptr;
  for (size_t i = 0; i + 1 < body.size(); ++i)
    if (body[i].kind != StmtKind::Let) return nullptr;
  return &body.back();
}

// The nested chain of loops starting at `s` that all carry (or all do not carry) reductions.
std::vector<const Stmt*> nest_chain(const Stmt* s, bool reduction) {
  std::vector<const Stmt*> chain;
  while (s && s->reduces.empty() != reduction) {
    chain.push_back(s);
    s = next_for(s->body, reduction);
    if (s && reduction && s->reduces != chain[0]->reduces) break;
  }
  return chain;
}

// A region can run block-cooperatively: Lets/Assigns (uniform), reduction loops whose
// single accumulator is declared in the region, output loops (spread over the threads),
// and stores (thread 0). Anything else (If, local arrays) keeps one thread per iteration.
bool coop_ok(const std::vector<Stmt>& body) {
  std::set<std::string> lets;
  bool any_loop = false;
  for (const Stmt& s : body) {
    switch (s.kind) {
      case StmtKind::Let: lets.insert(s.var); break;
      case StmtKind::Assign: case StmtKind::Store: break;
      case StmtKind::For:
        any_loop = true;
        if (has_kind(s.body, StmtKind::Alloc) || has_kind(s.body, StmtKind::If)) return false;
        if (s.reduces.size() > 1 || (s.reduces.size() == 1 && !lets.count(s.reduces[0]))) return false;
        if (s.reduces.empty() && has_kind(s.body, StmtKind::Assign)) return false;
        break;
      default: return false;
    }
  }
  return any_loop;
}

// Element stride of the first load under `body` with respect to loop variable v (0 when
// it does not move with v); -1 when it cannot be evaluated.
int64_t load_stride(const std::vector<Stmt>& body, const std::string& v, const loop::LoopFunc& f) {
  int64_t result = -1;
  loop::walk_exprs(body, [&](const ExprRef& e) {
    std::function<void(const ExprRef&)> visit = [&](const ExprRef& x) {
      if (result >= 0) return;
      if (x->kind == loop::ExprKind::Load) {
        std::map<std::string, int64_t, std::less<>> env;
        std::function<void(const ExprRef&)> vars = [&](const ExprRef& y) {
          if (y->kind == loop::ExprKind::Var) env[y->name] = 3;
          for (auto& a : y->args) vars(a);
        };
        vars(x->args[0]);
        for (auto& d : f.dims) env[d] = 4096;  // a typical large dim
        env[v] = 1;
        int64_t a = 0, b = 0;
        if (loop::eval_index(x->args[0], env, a)) {
          env[v] = 2;
          if (loop::eval_index(x->args[0], env, b)) result = std::abs(b - a);
        }
        return;
      }
      for (auto& a : x->args) visit(a);
    };
    visit(e);
  });
  return result;
}

int64_t const_extent_product(const std::vector<Stmt>& body) {  // -1: symbolic somewhere
  int64_t best = 0;
  for (const Stmt& s : body) {
    if (s.kind != StmtKind::For) continue;
    int64_t p = 1;
    for (const Stmt* l : nest_chain(&s, !s.reduces.empty())) {
      if (!loop::is_const(l->extent)) return -1;
      p *= l->extent->i;
    }
    best = std::max(best, p);
  }
  return best;
}

// ---- [SECTION] row cache: a row kept in registers across a region's loops ------------

// A region loop flattened the way emit_flat_loop runs it: its constant extent (-1 when
// symbolic), its variables as functions of one canonical counter (so two loops' index
// expressions can be compared), and the names its body defines (an index that uses one
// is not comparable across loops).
struct FlatLoop {
  int64_t n = -1;
  std::map<std::string, ExprRef> canon;
  std::set<std::string> locals;
};

FlatLoop flat_of(const Stmt& s) {
  FlatLoop r;
  std::vector<const Stmt*> chain = nest_chain(&s, !s.reduces.empty());
  int64_t n = 1;
  for (const Stmt* l : chain) {
    if (!loop::is_const(l->extent)) return r;
    n *= l->extent->i;
  }
  ExprRef rest = loop::var("lathe_c");
  for (size_t k = chain.size(); k-- > 0;) {
    r.canon[chain[k]->var] = k == 0 ? rest : loop::binary(Op::Mod, rest, chain[k]->extent);
    if (k > 0) rest = loop::binary(Op::IDiv, rest, chain[k]->extent);
  }
  r.n = n;
  loop::walk(s.body, [&](const Stmt& x) {
    if (x.kind == StmtKind::Let || x.kind == StmtKind::Alloc) r.locals.insert(x.var);
    return true;
  });
  return r;
}

// "index|mask|" in the canonical counter; nullopt when it uses a name local to the loop
// or loads (a gather's index could read a buffer the region writes).
std::optional<std::string> access_key(const ExprRef& index, const ExprRef& mask, const FlatLoop& fl) {
  std::string key;
  for (ExprRef e : {index, mask}) {
    if (e) {
      for (const auto& [v, c] : fl.canon) e = loop::substitute(e, v, c);
      bool local = false;
      std::function<void(const ExprRef&)> scan = [&](const ExprRef& x) {
        if (x->kind == loop::ExprKind::Var && fl.locals.count(x->name)) local = true;
        if (x->kind == loop::ExprKind::Load) local = true;  // a gathered index may change between loops
        for (const ExprRef& a : x->args)
          if (a) scan(a);
      };
      scan(e);
      if (local) return std::nullopt;
      key += loop::print_expr(e);
    }
    key += "|";
  }
  return key;
}

void each_load(const ExprRef& e, const std::function<void(const ExprRef&)>& fn) {
  if (!e) return;
  if (e->kind == loop::ExprKind::Load) fn(e);
  for (const ExprRef& a : e->args) each_load(a, fn);
}

}  // namespace

// Which buffers of a block-per-row region to keep in registers. A buffer qualifies when
// at least two of the region's loops touch it, every access (load or store) is at the
// same element of the canonical counter, all those loops have the same constant extent,
// and nothing outside the loops touches it. Each thread then owns the same elements in
// every loop (counter = threadIdx.x + j * block), so the row needs no synchronization:
// a thread reads back only what it wrote. Stores reach global memory in the last loop
// that stores, which by the same-element rule overwrites every element stored before.
void CudaEmitter::plan_row_cache(const std::vector<Stmt>& body, int block) {
  row_cache_.clear();
  row_n_ = row_iters_ = 0;
  row_block_ = block;
  struct Use {
    std::string key;
    bool bad = false;
    RowCache rc;
  };
  std::map<int, Use> uses;
  int64_t n0 = -1;
  for (const Stmt& s : body) {
    if (s.kind != StmtKind::For) {  // region-level statements: uniform values, thread-0 stores
      for (const ExprRef* e : {&s.value, &s.index, &s.cond}) each_load(*e, [&](const ExprRef& x) { uses[x->buffer].bad = true; });
      if (s.kind == StmtKind::Store) uses[s.buffer].bad = true;
      continue;
    }
    FlatLoop fl = flat_of(s);
    if (n0 < 0) n0 = fl.n;
    bool same = fl.n > 0 && fl.n == n0;
    auto note = [&](int buffer, const ExprRef& index, const ExprRef& mask) {
      Use& u = uses[buffer];
      std::optional<std::string> k = same ? access_key(index, mask, fl) : std::nullopt;
      if (!k || (!u.key.empty() && u.key != *k)) {
        u.bad = true;
        return;
      }
      u.key = *k;
      u.rc.loops.insert(&s);
    };
    loop::walk_exprs(s.body, [&](const ExprRef& e) {
      each_load(e, [&](const ExprRef& x) {
        note(x->buffer, x->args[0], x->args.size() > 1 ? x->args[1] : nullptr);
        uses[x->buffer].rc.fill.emplace(&s, x);
      });
    });
    loop::walk(s.body, [&](const Stmt& x) {
      if (x.kind == StmtKind::Store) {
        note(x.buffer, x.index, nullptr);
        uses[x.buffer].rc.last_store = &s;
      }
      return true;
    });
  }
  if (n0 <= 0 || block <= 0) return;
  int64_t iters = (n0 + block - 1) / block;
  if (iters > 32) return;  // registers: at most 32 elements of each cached row per thread
  for (auto& [b, u] : uses) {
    if (u.bad || u.rc.loops.size() < 2) continue;
    u.rc.name = "lathe_row" + std::to_string(b);
    row_cache_[b] = u.rc;
  }
  row_n_ = n0;
  row_iters_ = iters;
}

// At the top of a region loop's body: the elements of the rows it loads and that no
// earlier loop brought in, from global memory into the thread's registers.
void CudaEmitter::emit_row_cache_fill(const Stmt& loop, int depth) {
  for (auto& [b, rc] : row_cache_) {
    auto it = rc.fill.find(&loop);
    if (rc.valid || it == rc.fill.end()) continue;
    const ExprRef& ld = it->second;
    const auto& p = f_.buffers.at(b);
    out_ << pad(depth);
    if (ld->args.size() > 1 && ld->args[1]) out_ << "if (" << expr(ld->args[1]) << ") ";
    out_ << rc.name << "[lathe_j] = " << p.name << "[" << expr(ld->args[0]) << "];\n";
  }
}

std::string LaunchShape::describe() const {
  std::string w = work ? loop::print_expr(work) : "1";
  if (!tiled.empty()) return "one block of " + std::to_string(block) + " threads per tile over " + w + " tiles (" + tiled + ")";
  if (block_reduce && !work) return "one block of " + std::to_string(block) + " threads reducing together";
  if (per_block) return "grid-stride over " + w + " blocks of " + std::to_string(block) + " threads" +
                        (block_reduce ? " (block-wide reductions)" : "");
  if (!work) return "a single thread";
  return "grid-stride over " + w + " threads, " + std::to_string(block) + " per block";
}

// ---- [SECTION] statement emitter ------------------------------------------------------

void CudaEmitter::emit_block(const std::vector<Stmt>& body, int depth) {
  auto saved = allocs_;
  for (const Stmt& s : body) emit_stmt(s, depth);
  allocs_ = saved;
}

void CudaEmitter::emit_for(const Stmt& s, int depth) {
  if (s.annot.unroll > 1) out_ << pad(depth) << "#pragma unroll " << s.annot.unroll << "\n";
  out_ << pad(depth) << "for (long long " << s.var << " = 0; " << s.var << " < " << expr(s.extent) << "; ++" << s.var << ") {";
  if (!s.note.empty()) out_ << "  // " << s.note;
  out_ << "\n";
  emit_block(s.body, depth + 1);
  out_ << pad(depth) << "}\n";
}

// for (counter = start; counter < n; counter += step) { v_k = …; body of the last loop }
void CudaEmitter::emit_flat_loop(const std::vector<const Stmt*>& chain, const std::string& start, const std::string& step,
                                 int depth, const std::string& counter) {
  ExprRef n = loop::const_int(1);
  for (const Stmt* l : chain) n = loop::mul(n, l->extent);
  std::string notes;
  for (const Stmt* l : chain) notes += (notes.empty() ? "" : ", ") + l->var + (l->note.empty() ? "" : ": " + l->note);
  int d = depth + 1;
  if (row_loop_) {
    // the row cache's form: iteration j of every region loop is the same element, held in
    // register j of the rows' arrays (unrolled, so the arrays stay in registers)
    out_ << pad(depth) << "#pragma unroll\n";
    out_ << pad(depth) << "for (int lathe_j = 0; lathe_j < " << row_iters_ << "; ++lathe_j) {  // " << notes
         << " (row in registers)\n";
    out_ << pad(d) << "const long long " << counter << " = threadIdx.x + lathe_j * " << row_block_ << "LL;\n";
    if (row_n_ % row_block_ != 0) out_ << pad(d++) << "if (" << counter << " < " << row_n_ << "LL) {\n";
  } else {
    out_ << pad(depth) << "for (long long " << counter << " = " << start << "; " << counter << " < " << expr(n) << "; "
         << counter << " += " << step << ") {  // " << notes << "\n";
  }
  ExprRef rest = loop::var(counter);
  for (size_t k = chain.size(); k-- > 0;) {
    ExprRef v = k == 0 ? rest : loop::binary(Op::Mod, rest, chain[k]->extent);
    // (in the row form, loads of cached rows no longer use the loop's variables)
    out_ << pad(d) << (row_loop_ ? "[[maybe_unused]] " : "") << "const long long " << chain[k]->var << " = " << expr(v) << ";\n";
    if (k > 0) rest = loop::binary(Op::IDiv, rest, chain[k]->extent);
  }
  if (row_loop_) emit_row_cache_fill(*row_loop_, d);
  emit_chain_lets(chain, d);
  emit_block(chain.back()->body, d);
  if (d > depth + 1) out_ << pad(depth + 1) << "}\n";
  out_ << pad(depth) << "}\n";
}

// The Lets that sit between the loops of a chain (all but the last loop's body).
void CudaEmitter::emit_chain_lets(const std::vector<const Stmt*>& chain, int depth) {
  for (size_t k = 0; k + 1 < chain.size(); ++k)
    for (const Stmt& s : chain[k]->body)
      if (s.kind == StmtKind::Let) emit_stmt(s, depth);
}

// A region where the whole block works together (see coop_ok): reduction loops are spread
// over the threads and combined with lathe_block_reduce; output loops are spread over the
// threads; stores of uniform values are done by thread 0.
void CudaEmitter::emit_coop_block(const std::vector<Stmt>& body, int depth) {
  std::map<std::string, DType> lets;
  for (auto& [b, rc] : row_cache_) {
    rc.valid = false;
    out_ << pad(depth) << storage_type(f_.buffers.at(b).dtype) << " " << rc.name << "[" << row_iters_ << "];  // "
         << f_.buffers.at(b).name << "'s row, kept in registers\n";
  }
  for (const Stmt& s : body) {
    if (s.kind == StmtKind::Let) lets[s.var] = s.dtype;
    if (s.kind == StmtKind::Store) {
      out_ << pad(depth) << "if (threadIdx.x == 0) ";
      emit_stmt(s, 0);
      continue;
    }
    if (s.kind != StmtKind::For) {
      emit_stmt(s, depth);
      continue;
    }
    bool red = !s.reduces.empty();
    std::vector<const Stmt*> chain = nest_chain(&s, red);
    coop_ = true;
    for (auto& [b, rc] : row_cache_)
      if (rc.loops.count(&s)) row_loop_ = &s;
    emit_flat_loop(chain, "threadIdx.x", "blockDim.x", depth, "lathe_" + chain[0]->var);
    for (auto& [b, rc] : row_cache_)
      if (rc.loops.count(&s)) rc.valid = true;
    row_loop_ = nullptr;
    coop_ = false;
    if (red) {
      const std::string& acc = s.reduces[0];
      DType dt = lets.at(acc);
      std::string T = compute_type(dt);
      out_ << pad(depth) << "{\n" << pad(depth + 1) << "__shared__ " << T << " lathe_smem[32];\n";
      out_ << pad(depth + 1) << acc << " = lathe_block_reduce(" << acc << ", lathe_smem, " << combine_lambda(s.reduce_op, dt) << ");\n";
      out_ << pad(depth) << "}\n";
    }
  }
}

void CudaEmitter::emit_stmt(const Stmt& s, int depth) {
  switch (s.kind) {
    case StmtKind::For: emit_for(s, depth); break;
    case StmtKind::If:
      out_ << pad(depth) << "if (" << expr(s.cond) << ") {\n";
      emit_block(s.body, depth + 1);
      if (!s.else_body.empty()) {
        out_ << pad(depth) << "} else {\n";
        emit_block(s.else_body, depth + 1);
      }
      out_ << pad(depth) << "}\n";
      break;
    case StmtKind::Store: {
      const auto& p = f_.buffers.at(s.buffer);
      std::string v = expr(s.value);
      if (p.dtype == DType::F16) v = "__float2half_rn(" + v + ")";
      if (p.dtype == DType::BF16) v = "__float2bfloat16_rn(" + v + ")";
      if (auto rc = row_loop_ ? row_cache_.find(s.buffer) : row_cache_.end();
          rc != row_cache_.end() && rc->second.loops.count(row_loop_)) {
        out_ << pad(depth) << rc->second.name << "[lathe_j] = " << v << ";\n";
        if (rc->second.last_store != row_loop_) break;
        v = rc->second.name + "[lathe_j]";
      }
      out_ << pad(depth) << p.name << "[" << expr(s.index) << "] = " << v << ";\n";
      break;
    }
    case StmtKind::Let:
      out_ << pad(depth) << compute_type(s.dtype) << " " << s.var << " = " << expr(s.value) << ";\n";
      break;
    case StmtKind::Assign: {
      // an f16/bf16 accumulator combines in float, unrounded (the interpreter rounds once)
      const ExprRef& v = s.value;
      if (half_accs_.count(s.var) && v->kind == loop::ExprKind::Binary && v->args[0]->kind == loop::ExprKind::Var &&
          v->args[0]->name == s.var) {
        std::string x = expr(v->args[1]);
        std::string r = v->op == Op::Add ? s.var + " + " + x : v->op == Op::Mul ? s.var + " * " + x
                                                                                : "lathe_maxf(" + s.var + ", " + x + ")";
        out_ << pad(depth) << s.var << " = " << r << ";\n";
        break;
      }
      out_ << pad(depth) << s.var << " = " << expr(s.value) << ";\n";
      break;
    }
    case StmtKind::Alloc: {
      int64_t bytes = s.count * s.lanes * static_cast<int64_t>(dtype_size(s.dtype));
      if (s.lanes > 1 || bytes > 16 * 1024)
        throw UserError("cuda renderer: kernel " + f_.name + " allocates local array " + s.var + " of " + std::to_string(bytes) +
                        " bytes" + (s.lanes > 1 ? " of vectors" : "") + "; the CUDA renderer supports scalar arrays up to 16 KiB");
      allocs_[s.var] = &s;
      out_ << pad(depth) << compute_type(s.dtype) << " " << s.var << "[" << s.count << "];\n";
      break;
    }
    case StmtKind::LocalStore:
      out_ << pad(depth) << s.var << "[" << expr(s.index) << "] = " << expr(s.value) << ";\n";
      break;
    case StmtKind::Prefetch: break;  // a CPU cache hint: the GPU's caches are left to the hardware
  }
}

// ---- [SECTION] render(): the kernel function ------------------------------------------

std::string CudaEmitter::signature() {
  std::ostringstream o;
  o << "extern \"C\" __global__ void " << f_.name << "(";
  std::string sep;
  for (const auto& p : f_.buffers) {
    o << sep << (p.written ? "" : "const ") << storage_type(p.dtype) << "* __restrict__ " << p.name;
    sep = ", ";
  }
  for (const auto& d : f_.dims) {
    o << sep << "long long " << expr(loop::var(d));
    sep = ", ";
  }
  o << ") {\n";
  return o.str();
}

CudaKernel CudaEmitter::render(const RenderOptions& o) {
  CudaKernel k;
  k.name = f_.name;
  loop::walk(f_.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::For)
      for (auto& r : s.reduces) half_accs_.insert(r);
    return true;
  });
  std::set<std::string> keep;  // only accumulators of half dtype stay in the set
  loop::walk(f_.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::Let && half_accs_.count(s.var) && is_half(s.dtype)) keep.insert(s.var);
    return true;
  });
  half_accs_ = keep;

  // the kernel's top level: Lets, then one output loop nest (the usual shape)
  const std::vector<Stmt>& top = f_.body;
  const Stmt* first_loop = nullptr;
  size_t loops = 0, after = 0;
  for (const Stmt& s : top) {
    if (s.kind == StmtKind::For) { ++loops; if (!first_loop) first_loop = &s; }
    else if (first_loop) ++after;
  }
  bool alias = aliases(f_);
  std::vector<const Stmt*> chain;
  if (loops == 1 && after == 0 && first_loop->reduces.empty()) {
    chain = nest_chain(first_loop, false);
    if (alias) chain.resize(first_loop->annot.parallel ? 1 : 0);
  }

  enum class Mode { Single, Flat, Blocks, CoopRows, CoopAll, Tiled } mode = Mode::Single;
  const std::vector<Stmt>* inner = chain.empty() ? nullptr : &chain.back()->body;
  if (!chain.empty()) {
    mode = Mode::Flat;
    // rows with long reductions that read along the reduction axis: a block per row
    int64_t work = const_extent_product(*inner);
    if (!alias && f_.kind != "matmul" && has_loop(*inner) && coop_ok(*inner) && (work < 0 || work >= 64)) {
      const Stmt* red = nullptr;
      for (const Stmt& s : *inner)
        if (s.kind == StmtKind::For && !s.reduces.empty()) { red = &s; break; }
      if (red) {
        auto rchain = nest_chain(red, true);
        int64_t along_row = load_stride(rchain.back()->body, chain.back()->var, f_);
        int64_t along_red = load_stride(rchain.back()->body, rchain.back()->var, f_);
        if (along_row != 1 && along_red == 1) mode = Mode::CoopRows;
      }
    }
    // a schedule's split: parallel loop → blocks, its constant inner loop → threads
    if (mode == Mode::Flat && chain.size() == 2 && chain[0]->annot.parallel && loop::is_const(chain[1]->extent) &&
        chain[1]->extent->i % 32 == 0 && chain[1]->extent->i <= 1024)
      mode = Mode::Blocks;
  } else if (!alias && loops >= 1 && coop_ok(top)) {
    mode = Mode::CoopAll;
  }

  // the signature: buffers, then dims
  out_ << "// kernel " << f_.name << " (" << f_.kind << ")\n";
  out_ << signature();

  LaunchShape& L = k.launch;
  L.block = o.block;
  auto work_of = [](const std::vector<const Stmt*>& ch) {
    ExprRef n = loop::const_int(1);
    for (const Stmt* l : ch) n = loop::mul(n, l->extent);
    return n;
  };
  // top-level statements before the loop nest (loop-invariant lets) run in every thread
  auto emit_prefix = [&]() {
    for (const Stmt& s : top) {
      if (&s == first_loop) break;
      emit_stmt(s, 1);
    }
  };
  std::vector<Stmt> prefix;
  for (const Stmt& s : top) {
    if (&s == first_loop) break;
    prefix.push_back(s);
  }
  split_k_ = o.split_k;
  if (const char* e = std::getenv("LATHE_CUDA_TILE")) {  // A/B comparisons and tests: 4x4, 4x8, 8x4, 8x8
    std::string t = e;
    if (t.size() == 3 && t[1] == 'x' && (t[0] == '4' || t[0] == '8') && (t[2] == '4' || t[2] == '8'))
      forced_tile_ = {t[0] - '0', t[2] - '0'};
    else if (!t.empty())
      throw UserError("LATHE_CUDA_TILE=" + t + ": expected 4x4, 4x8, 8x4 or 8x8 (register tile per thread, M x N)");
  }
  if (mode == Mode::Flat && o.tiled && !alias && emit_tiled(chain, prefix, L)) mode = Mode::Tiled;
  switch (mode) {
    case Mode::Tiled:
      break;
    case Mode::Flat:
      L.work = work_of(chain);
      emit_prefix();
      emit_flat_loop(chain, "(long long)blockIdx.x * blockDim.x + threadIdx.x", "(long long)gridDim.x * blockDim.x", 1, "lathe_t");
      break;
    case Mode::Blocks: {
      L.work = chain[0]->extent;
      L.per_block = true;
      L.block = static_cast<int>(chain[1]->extent->i);
      emit_prefix();
      out_ << "  for (long long " << chain[0]->var << " = blockIdx.x; " << chain[0]->var << " < " << expr(chain[0]->extent)
           << "; " << chain[0]->var << " += gridDim.x) {  // " << chain[0]->note << " (blocks)\n";
      out_ << "    const long long " << chain[1]->var << " = threadIdx.x;  // " << chain[1]->note << " (threads)\n";
      emit_chain_lets(chain, 2);
      emit_block(chain[1]->body, 2);
      out_ << "  }\n";
      break;
    }
    case Mode::CoopRows: {
      L.work = work_of(chain);
      L.per_block = true;
      L.block_reduce = true;
      int64_t w = const_extent_product(*inner);
      L.block = (w < 0 || w >= 4096) ? std::max(o.block, 256) : w >= 1024 ? 256 : w >= 256 ? 128 : 64;
      if (w > 32 * L.block && w <= 32 * 1024) L.block = static_cast<int>((w / 32 + 31) / 32 * 32);  // rows up to 32 per thread
      if (o.row_cache) plan_row_cache(*inner, L.block);
      emit_prefix();
      ExprRef n = work_of(chain);
      out_ << "  for (long long lathe_b = blockIdx.x; lathe_b < " << expr(n) << "; lathe_b += gridDim.x) {  // one block per row\n";
      ExprRef rest = loop::var("lathe_b");
      for (size_t i = chain.size(); i-- > 0;) {
        ExprRef v = i == 0 ? rest : loop::binary(Op::Mod, rest, chain[i]->extent);
        out_ << "    const long long " << chain[i]->var << " = " << expr(v) << ";\n";
        if (i > 0) rest = loop::binary(Op::IDiv, rest, chain[i]->extent);
      }
      emit_chain_lets(chain, 2);
      emit_coop_block(*inner, 2);
      row_cache_.clear();
      out_ << "  }\n";
      break;
    }
    case Mode::CoopAll:
      L.work = nullptr;
      L.block_reduce = true;
      L.block = std::max(o.block, 256);
      emit_coop_block(top, 1);
      break;
    case Mode::Single:
      L.work = nullptr;
      L.block = 1;
      out_ << "  if (blockIdx.x != 0 || threadIdx.x != 0) return;  // runs on one thread\n";
      emit_block(top, 1);
      break;
  }
  out_ << "}\n";
  k.source = "// launch: " + L.describe() + "\n" + globals_ + out_.str();
  return k;
}

CudaKernel render_cuda_kernel(const loop::LoopFunc& f, const RenderOptions& o) {
  CudaEmitter em(f);
  RenderOptions ro = o;
  if (const char* e = std::getenv("LATHE_CUDA_TILED"); e && std::string(e) == "0") ro.tiled = false;  // A/B comparisons
  if (const char* e = std::getenv("LATHE_CUDA_ROW_CACHE"); e && std::string(e) == "0") ro.row_cache = false;
  if (const char* e = std::getenv("LATHE_CUDA_SPLIT_K"); e && std::string(e) == "0") ro.split_k = false;
  return em.render(ro);
}

}  // namespace lathe::cuda
