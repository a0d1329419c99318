// emit.cpp — loop IR -> LLVM IR. See emit.h; the emitter's files: emit_function.h.
//
// [SECTION] buffers, dims and alias scopes
// [SECTION] types
// [SECTION] module entry point
#include "backends/llvm/emit.h"
#include "backends/llvm/emit_function.h"
#include "backends/llvm/emit_math.h"
#include "backends/llvm/jit.h"

#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>

#include "core/ir/diag.h"

namespace lathe::llvmjit {

namespace detail {

bool host_has(const char* feature) {
  static const llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  auto it = features.find(feature);
  return it != features.end() && it->second;
}

// ---------------------------------------------------------------------------------------
// [SECTION] buffers, dims and alias scopes
// ---------------------------------------------------------------------------------------

// Emits the kernel body into fn_ (args: buffers, dims).
void FunctionEmitter::emit_kernel() {
  auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry);
  buffers_arg_ = fn_->getArg(0);
  dims_arg_ = fn_->getArg(1);
  load_dims_and_buffers();
  emit_stmts(lf_.body);
  pop_scratch();
  b_.CreateRetVoid();
}

// the scratch arrays this function took (lathe_llvm_scratch_push), given back before it returns
void FunctionEmitter::pop_scratch() {
  if (scratch_pushes_ == 0) return;
  auto* pop_ty = llvm::FunctionType::get(b_.getVoidTy(), {b_.getInt64Ty()}, false);
  b_.CreateCall(m_.getOrInsertFunction("lathe_llvm_scratch_pop", pop_ty), {b_.getInt64(scratch_pushes_)});
}

void FunctionEmitter::make_alias_scopes() {
  llvm::MDBuilder mdb(ctx_);
  llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain(lf_.name);
  for (size_t p = 0; p <= lf_.buffers.size(); ++p)
    scope_of_.push_back(mdb.createAnonymousAliasScope(
        domain, p < lf_.buffers.size() ? lf_.name + "." + lf_.buffers[p].name : lf_.name + ".locals"));
  for (size_t p = 0; p < scope_of_.size(); ++p) {
    std::vector<llvm::Metadata*> others;
    for (size_t q = 0; q < scope_of_.size(); ++q)
      if (q != p) others.push_back(scope_of_[q]);
    noalias_of_.push_back(llvm::MDNode::get(ctx_, others));
  }
}

// `scope`: a buffer parameter's index, or -1 for a local array
llvm::Value* FunctionEmitter::tag_access(llvm::Value* v, int scope) {
  auto* i = llvm::dyn_cast<llvm::Instruction>(v);
  if (!i || scope_of_.empty()) return v;
  size_t k = scope < 0 ? scope_of_.size() - 1 : static_cast<size_t>(scope);
  i->setMetadata(llvm::LLVMContext::MD_alias_scope, llvm::MDNode::get(ctx_, {scope_of_[k]}));
  i->setMetadata(llvm::LLVMContext::MD_noalias, noalias_of_[k]);
  return v;
}

void FunctionEmitter::load_dims_and_buffers() {
  if (alias_scopes()) make_alias_scopes();
  for (size_t p = 0; p < lf_.buffers.size(); ++p)
    buffer_ptrs_.push_back(b_.CreateLoad(b_.getPtrTy(), b_.CreateConstGEP1_64(b_.getPtrTy(), buffers_arg_, p),
                                         lf_.buffers[p].name));
  for (size_t d = 0; d < lf_.dims.size(); ++d) {
    llvm::LoadInst* v = b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstGEP1_64(b_.getInt64Ty(), dims_arg_, d), lf_.dims[d]);
    if (ranges_ && d < ranges_->size() && (*ranges_)[d].first <= (*ranges_)[d].second &&
        (*ranges_)[d].second < INT64_MAX) {
      auto [lo, hi] = (*ranges_)[d];
      v->setMetadata(llvm::LLVMContext::MD_range,
                     llvm::MDBuilder(ctx_).createRange(llvm::APInt(64, static_cast<uint64_t>(lo), true),
                                                       llvm::APInt(64, static_cast<uint64_t>(hi + 1), true)));
    }
    dims_[lf_.dims[d]] = v;
  }
}

// ---------------------------------------------------------------------------------------
// [SECTION] types
// ---------------------------------------------------------------------------------------

// The register type of a scalar of dtype dt (bf16 computes in f32; bool is i1).
llvm::Type* FunctionEmitter::scalar_type(DType dt) {
  switch (dt) {
    case DType::Bool: return b_.getInt1Ty();
    case DType::U8: case DType::I8: return b_.getInt8Ty();
    case DType::I16: case DType::U16: return b_.getInt16Ty();
    case DType::I32: case DType::U32: return b_.getInt32Ty();
    case DType::I64: case DType::U64: return b_.getInt64Ty();
    case DType::F16: return b_.getFloatTy();
    case DType::BF16: return b_.getFloatTy();
    case DType::F32: return b_.getFloatTy();
    case DType::F64: return b_.getDoubleTy();
  }
  return b_.getInt64Ty();
}

// The in-memory type (bool is a byte, bf16 its 16 bits).
llvm::Type* FunctionEmitter::memory_type(DType dt) {
  if (dt == DType::Bool) return b_.getInt8Ty();
  if (dt == DType::F16) return b_.getHalfTy();
  if (dt == DType::BF16) return b_.getInt16Ty();
  return scalar_type(dt);
}

llvm::AllocaInst* FunctionEmitter::entry_alloca(llvm::Type* t, const std::string& name, llvm::Value* count) {
  llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  return eb.CreateAlloca(t, count, name);
}

}  // namespace detail

// -----------------------------------------------------------------------------------------
// [SECTION] module entry point
// -----------------------------------------------------------------------------------------

const char* emitter_build_id() {
  static const std::string id = std::string(__DATE__ " " __TIME__) + "|" + detail::emit_expr_stamp() + "|" + detail::emit_stmt_stamp() +
                                "|" + detail::emit_parallel_stamp() + "|" + detail::emit_math_stamp();
  return id.c_str();
}

std::unique_ptr<llvm::Module> emit_module(const std::vector<const loop::LoopFunc*>& funcs, llvm::LLVMContext& ctx,
                                          const std::string& module_name, const DimRanges* ranges) {
  // The optimizer's remarks ("loop not vectorized") are not the user's business; real
  // errors still surface through verification and codegen failures.
  ctx.setDiagnosticHandlerCallBack(
      [](const llvm::DiagnosticInfo* di, void*) {
        if (di->getSeverity() == llvm::DS_Error) {
          std::string msg;
          llvm::raw_string_ostream os(msg);
          llvm::DiagnosticPrinterRawOStream dp(os);
          di->print(dp);
          throw InternalError("LLVM: " + os.str());
        }
      },
      nullptr);
  auto m = std::make_unique<llvm::Module>(module_name, ctx);
  llvm::IRBuilder<> b(ctx);
  auto* ptr = b.getPtrTy();
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr}, false);
  for (const loop::LoopFunc* lf : funcs) {
    auto* fn = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, lf->name, *m);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    const std::vector<std::pair<int64_t, int64_t>>* r = nullptr;
    if (ranges)
      if (auto it = ranges->find(lf->name); it != ranges->end()) r = &it->second;
    detail::FunctionEmitter fe(*m, *lf, fn, r);
    fe.emit_kernel();
  }
  return m;
}

}  // namespace lathe::llvmjit
