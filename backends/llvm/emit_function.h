// emit_function.h — internal to backends/llvm: FunctionEmitter, one LoopFunc into one
// llvm::Function (emit.h's emit_module makes one per kernel). Split along its concerns:
//   emit.cpp           the module entry point, types, buffers, dims and alias scopes
//   emit_expr.cpp      expressions (loads, arithmetic, casts, the integer dot)
//   emit_stmt.cpp      statements and counted loops with their llvm.loop hints
//   emit_parallel.cpp  parallel loops outlined into chunk functions (parallel.h runs them)
//   emit_math.cpp      exp2/log2 polynomials and half rounding (free functions)
#pragma once
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/loop/loop_ir.h"

namespace lathe::llvmjit::detail {

using loop::Expr;
using loop::ExprKind;
using loop::ExprRef;
using loop::Stmt;
using loop::StmtKind;

inline bool is_unsigned(DType dt) { return dt == DType::Bool || is_unsigned_int(dt); }

// Does the host (the JIT compiles for it) have this x86 feature ("avx2", "avxvnni", …)?
bool host_has(const char* feature);

// __DATE__ " " __TIME__ of each translation unit of the emitter but emit.cpp, whose
// emitter_build_id joins them (a change to any file gives a new kernel-cache key); emit_math.cpp's
// is emit_math.h's
const char* emit_expr_stamp();
const char* emit_stmt_stamp();
const char* emit_parallel_stamp();

struct Var {
  llvm::Value* slot = nullptr;  // alloca (scalars) or base pointer (arrays)
  llvm::Type* type = nullptr;   // value type (scalars) or element type (arrays)
  bool array = false;
  int lanes = 1;                // arrays: lanes per element
  DType dtype = DType::I64;
};

class FunctionEmitter {
 public:
  FunctionEmitter(llvm::Module& m, const loop::LoopFunc& f, llvm::Function* fn,
                  const std::vector<std::pair<int64_t, int64_t>>* ranges = nullptr)
      : m_(m), ctx_(m.getContext()), b_(ctx_), lf_(f), fn_(fn), ranges_(ranges) {}

  // Emits the kernel body into fn_ (args: buffers, dims).
  void emit_kernel();

 private:
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  int64_t scratch_pushes_ = 0;  // arrays taken from the thread's scratch stack (pop_scratch)
  llvm::IRBuilder<> b_;
  const loop::LoopFunc& lf_;
  llvm::Function* fn_;
  const std::vector<std::pair<int64_t, int64_t>>* ranges_;  // per dim: known bounds (emit.h)
  llvm::Value* buffers_arg_ = nullptr;
  llvm::Value* dims_arg_ = nullptr;
  std::vector<llvm::Value*> buffer_ptrs_;
  std::map<std::string, llvm::Value*> dims_;
  std::map<std::string, Var> vars_;
  int outlined_ = 0;
  int reassoc_depth_ = 0;  // > 0 while emitting the body of a vectorized reduction loop

  // Scoped no-alias metadata: each buffer parameter is a scope of its own, the local arrays
  // one more; an access is in its scope and declared apart from all the others. The buffers
  // come through a pointer array, so without it LLVM could not tell them apart: its vectorizer
  // guarded each loop with runtime overlap checks and fell back to the scalar loop whenever
  // they failed, as they always do for a kernel whose output the memory plan put in place of
  // an input (memory_plan.cpp: it reads that input only at the element it stores, so the
  // vector loop is correct). ResNet-50 QDQ's residual kernels ran scalar, 3-15 ns an element.
  // The C backend declares the same of its parameters (`restrict`).
  std::vector<llvm::MDNode*> scope_of_;     // per buffer parameter, then the local arrays
  std::vector<llvm::MDNode*> noalias_of_;   // the other scopes, per scope

  // ---- emit.cpp: buffers, dims, alias scopes, types ----
  void pop_scratch();
  void make_alias_scopes();
  llvm::Value* tag_access(llvm::Value* v, int scope);
  void load_dims_and_buffers();
  llvm::Type* scalar_type(DType dt);
  llvm::Type* memory_type(DType dt);
  llvm::AllocaInst* entry_alloca(llvm::Type* t, const std::string& name, llvm::Value* count = nullptr);
  llvm::Type* vec(llvm::Type* t, int lanes) { return lanes == 1 ? t : llvm::FixedVectorType::get(t, lanes); }
  llvm::Type* reg_type(DType dt, int lanes) { return vec(scalar_type(dt), lanes); }
  llvm::Value* splat(llvm::Value* v, int lanes) {
    if (lanes == 1 || v->getType()->isVectorTy()) return v;
    return b_.CreateVectorSplat(lanes, v);
  }
  llvm::Value* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Value*> args, llvm::ArrayRef<llvm::Type*> tys) {
    return b_.CreateIntrinsic(id, tys, args);
  }

  // ---- emit_expr.cpp: expressions ----
  llvm::Value* float_to_int(llvm::Value* v, DType to, int lanes);
  llvm::Value* lookup_var(const std::string& name);
  llvm::Value* from_memory(DType dt, int lanes, llvm::Value* v);
  llvm::Value* to_memory(DType dt, int lanes, llvm::Value* v);
  llvm::Value* emit(const ExprRef& e);
  llvm::Value* emit_dot(const ExprRef& e);
  Var& array_var(const std::string& name);
  llvm::Value* emit_load(const ExprRef& e);
  llvm::Value* emit_unary(const ExprRef& e);
  llvm::Value* emit_binary(const ExprRef& e);
  llvm::Value* emit_cast(const ExprRef& e);

  // ---- emit_stmt.cpp: statements and loops ----
  void emit_stmts(const std::vector<Stmt>& body);
  void emit_stmt(const Stmt& s);
  void emit_loop(const Stmt& s, llvm::Value* begin, llvm::Value* end);
  bool shape_parametric() const;
  void add_loop_metadata(llvm::BranchInst* latch, const loop::LoopAnnot& a, bool param_trips = false);

  // ---- emit_parallel.cpp: outlined parallel loops ----
  // Emits an outlined parallel chunk: fn_(buffers, dims, captures, begin, end) runs
  // iterations [begin, end) of `loop`, with the captured variables restored.
  void emit_chunk(const Stmt& loop, const std::vector<std::pair<std::string, Var>>& captures);
  bool try_parallel(const Stmt& s);
  bool try_strided_copy(const Stmt& s);
  bool try_transpose_copy(const Stmt& s);
  static void collect_names(const ExprRef& e, std::set<std::string>& out);
  llvm::Value* to_bits(llvm::Value* v);
  llvm::Value* from_bits(llvm::Value* bits, llvm::Type* t);
};

}  // namespace lathe::llvmjit::detail
