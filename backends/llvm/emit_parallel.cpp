// emit_parallel.cpp — parallel loops outlined into chunk functions
// (fn(buffers, dims, captures, begin, end)) that lathe_llvm_parallel_for runs (parallel.h).
// See emit_function.h.
#include "backends/llvm/emit_function.h"

#include <set>

#include "core/ir/diag.h"

namespace lathe::llvmjit::detail {

const char* emit_parallel_stamp() { return __DATE__ " " __TIME__; }

// Emits an outlined parallel chunk: fn_(buffers, dims, captures, begin, end) runs
// iterations [begin, end) of `loop`, with the captured variables restored.
void FunctionEmitter::emit_chunk(const Stmt& loop, const std::vector<std::pair<std::string, Var>>& captures) {
  auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry);
  buffers_arg_ = fn_->getArg(0);
  dims_arg_ = fn_->getArg(1);
  load_dims_and_buffers();
  llvm::Value* caps = fn_->getArg(2);
  for (size_t i = 0; i < captures.size(); ++i) {
    auto& [name, outer] = captures[i];
    llvm::Value* bits = b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstGEP1_64(b_.getInt64Ty(), caps, i));
    Var v = outer;
    if (outer.array) {
      v.slot = b_.CreateIntToPtr(bits, b_.getPtrTy());
    } else {
      v.slot = entry_alloca(outer.type, name);
      b_.CreateStore(from_bits(bits, outer.type), v.slot);
    }
    vars_[name] = v;
  }
  emit_loop(loop, fn_->getArg(3), fn_->getArg(4));
  pop_scratch();
  b_.CreateRetVoid();
}

// Outlines a parallel loop into a chunk function. Falls back to a serial loop (returns
// false) when the body assigns a variable declared outside it (that would race).
bool FunctionEmitter::try_parallel(const Stmt& s) {
  std::set<std::string> used, assigned, declared;
  std::vector<Stmt> wrapper{s};
  loop::walk(wrapper, [&](const Stmt& st) {
    if (st.kind == StmtKind::Assign) assigned.insert(st.var);
    if (st.kind == StmtKind::LocalStore) used.insert(st.var);
    if (st.kind == StmtKind::Let || st.kind == StmtKind::Alloc || st.kind == StmtKind::For) declared.insert(st.var);
    return true;
  });
  loop::walk_exprs(wrapper, [&](const ExprRef& e) { collect_names(e, used); });
  for (auto& a : assigned)
    if (!declared.count(a)) return false;
  std::vector<std::pair<std::string, Var>> caps;
  for (auto& n : used) {
    if (declared.count(n)) continue;
    auto it = vars_.find(n);
    if (it == vars_.end()) continue;  // a dim
    if (!it->second.array && it->second.lanes != 1) return false;
    caps.push_back({n, it->second});
  }
  // the chunk function
  auto* i64 = b_.getInt64Ty();
  auto* ptr = b_.getPtrTy();
  auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, ptr, i64, i64}, false);
  std::string cname = fn_->getName().str() + ".par" + std::to_string(outlined_++);
  auto* chunk = llvm::Function::Create(fty, llvm::Function::InternalLinkage, cname, m_);
  {
    FunctionEmitter sub(m_, lf_, chunk, ranges_);
    sub.outlined_ = 0;
    sub.emit_chunk(s, caps);
  }
  // call site: captures array, then the pool
  llvm::Value* arr = entry_alloca(i64, "captures", b_.getInt64(std::max<size_t>(caps.size(), 1)));
  for (size_t k = 0; k < caps.size(); ++k) {
    auto& v = caps[k].second;
    llvm::Value* val = v.array ? v.slot : b_.CreateLoad(v.type, v.slot);
    b_.CreateStore(to_bits(val), b_.CreateConstGEP1_64(i64, arr, k));
  }
  auto* pf_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, ptr, ptr, i64}, false);
  llvm::FunctionCallee pf = m_.getOrInsertFunction("lathe_llvm_parallel_for", pf_ty);
  b_.CreateCall(pf, {chunk, buffers_arg_, dims_arg_, arr, emit(s.extent)});
  return true;
}

void FunctionEmitter::collect_names(const ExprRef& e, std::set<std::string>& out) {
  if (!e) return;
  if (e->kind == ExprKind::Var || e->kind == ExprKind::LocalLoad) out.insert(e->name);
  for (auto& a : e->args) collect_names(a, out);
}

llvm::Value* FunctionEmitter::to_bits(llvm::Value* v) {
  llvm::Type* t = v->getType();
  if (t->isPointerTy()) return b_.CreatePtrToInt(v, b_.getInt64Ty());
  if (t->isFloatingPointTy()) {
    unsigned w = t->getPrimitiveSizeInBits();
    v = b_.CreateBitCast(v, b_.getIntNTy(w));
  }
  return b_.CreateZExt(v, b_.getInt64Ty());
}

llvm::Value* FunctionEmitter::from_bits(llvm::Value* bits, llvm::Type* t) {
  if (t->isFloatingPointTy()) {
    unsigned w = t->getPrimitiveSizeInBits();
    return b_.CreateBitCast(b_.CreateTrunc(bits, b_.getIntNTy(w)), t);
  }
  return b_.CreateTrunc(bits, t);
}

}  // namespace lathe::llvmjit::detail
