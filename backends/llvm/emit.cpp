// emit.cpp — loop IR -> LLVM IR. See emit.h.
//
// [SECTION] types and constants
// [SECTION] math helpers (saturating casts; exp2/log2 polynomials and half rounding: emit_math.cpp)
// [SECTION] expressions
// [SECTION] statements (loops, parallel outlining)
// [SECTION] module entry point
#include "backends/llvm/emit.h"
#include "backends/llvm/emit_math.h"
#include "backends/llvm/jit.h"
#include "backends/llvm/parallel.h"

#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>
#include <map>
#include <set>

#include "core/ir/diag.h"

namespace lathe::llvmjit {

using loop::Expr;
using loop::ExprKind;
using loop::ExprRef;
using loop::Stmt;
using loop::StmtKind;

namespace {

// ---------------------------------------------------------------------------------------
// [SECTION] types and constants
// ---------------------------------------------------------------------------------------

bool is_unsigned(DType dt) { return dt == DType::Bool || is_unsigned_int(dt); }

// Does the host (the JIT compiles for it) have this x86 feature ("avx2", "avxvnni", …)?
bool host_has(const char* feature) {
  static const llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  auto it = features.find(feature);
  return it != features.end() && it->second;
}

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
  void emit_kernel() {
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
  void pop_scratch() {
    if (scratch_pushes_ == 0) return;
    auto* pop_ty = llvm::FunctionType::get(b_.getVoidTy(), {b_.getInt64Ty()}, false);
    b_.CreateCall(m_.getOrInsertFunction("lathe_llvm_scratch_pop", pop_ty), {b_.getInt64(scratch_pushes_)});
  }

  // Emits an outlined parallel chunk: fn_(buffers, dims, captures, begin, end) runs
  // iterations [begin, end) of `loop`, with the captured variables restored.
  void emit_chunk(const Stmt& loop, const std::vector<std::pair<std::string, Var>>& captures) {
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
  void make_alias_scopes() {
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
  llvm::Value* tag_access(llvm::Value* v, int scope) {
    auto* i = llvm::dyn_cast<llvm::Instruction>(v);
    if (!i || scope_of_.empty()) return v;
    size_t k = scope < 0 ? scope_of_.size() - 1 : static_cast<size_t>(scope);
    i->setMetadata(llvm::LLVMContext::MD_alias_scope, llvm::MDNode::get(ctx_, {scope_of_[k]}));
    i->setMetadata(llvm::LLVMContext::MD_noalias, noalias_of_[k]);
    return v;
  }

  void load_dims_and_buffers() {
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

  // The register type of a scalar of dtype dt (bf16 computes in f32; bool is i1).
  llvm::Type* scalar_type(DType dt) {
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
  llvm::Type* memory_type(DType dt) {
    if (dt == DType::Bool) return b_.getInt8Ty();
    if (dt == DType::F16) return b_.getHalfTy();
    if (dt == DType::BF16) return b_.getInt16Ty();
    return scalar_type(dt);
  }
  llvm::Type* vec(llvm::Type* t, int lanes) {
    return lanes == 1 ? t : llvm::FixedVectorType::get(t, lanes);
  }
  llvm::Type* reg_type(DType dt, int lanes) { return vec(scalar_type(dt), lanes); }

  llvm::AllocaInst* entry_alloca(llvm::Type* t, const std::string& name, llvm::Value* count = nullptr) {
    llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    return eb.CreateAlloca(t, count, name);
  }

  llvm::Value* to_bits(llvm::Value* v) {
    llvm::Type* t = v->getType();
    if (t->isPointerTy()) return b_.CreatePtrToInt(v, b_.getInt64Ty());
    if (t->isFloatingPointTy()) {
      unsigned w = t->getPrimitiveSizeInBits();
      v = b_.CreateBitCast(v, b_.getIntNTy(w));
    }
    return b_.CreateZExt(v, b_.getInt64Ty());
  }
  llvm::Value* from_bits(llvm::Value* bits, llvm::Type* t) {
    if (t->isFloatingPointTy()) {
      unsigned w = t->getPrimitiveSizeInBits();
      return b_.CreateBitCast(b_.CreateTrunc(bits, b_.getIntNTy(w)), t);
    }
    return b_.CreateTrunc(bits, t);
  }

  llvm::Value* splat(llvm::Value* v, int lanes) {
    if (lanes == 1 || v->getType()->isVectorTy()) return v;
    return b_.CreateVectorSplat(lanes, v);
  }

  // ---------------------------------------------------------------------------------------
  // [SECTION] math helpers
  // ---------------------------------------------------------------------------------------

  llvm::Value* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }

  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Value*> args, llvm::ArrayRef<llvm::Type*> tys) {
    return b_.CreateIntrinsic(id, tys, args);
  }

  // float -> integer: truncate toward zero, saturate, NaN -> 0 (the interpreter's rule).
  llvm::Value* float_to_int(llvm::Value* v, DType to, int lanes) {
    llvm::Type* t = reg_type(to, lanes);
    if (to == DType::Bool) {
      llvm::Value* z = llvm::Constant::getNullValue(v->getType());
      return b_.CreateFCmpUNE(v, z);  // NaN -> true, like set_f64
    }
    // 8-, 16- and 32-bit targets from f32/f64: clamp in float, convert, NaN -> 0: a few vector
    // instructions (x86 has no saturating conversion; fptosi.sat is scalarized per lane there,
    // ~10x slower in QuantizeLinear's rounding)
    llvm::Type* ft = v->getType();
    llvm::Type* fs = ft->getScalarType();
    int bits = dtype_size(to) * 8;
    bool uns = is_unsigned(to);
    if ((fs->isFloatTy() || fs->isDoubleTy()) && bits <= 32 && !(uns && bits == 32)) {
      auto C = [&](double x) { return splat(fconst(fs, x), lanes); };
      double lo = uns ? 0.0 : -std::ldexp(1.0, bits - 1), hi = uns ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
      // the largest value of the float type <= hi (f32 has no 2^31 - 1: 2147483520)
      double hi_f = fs->isFloatTy() ? static_cast<double>(std::nextafter(static_cast<float>(hi + 1), 0.0f)) : hi;
      llvm::Value* xc = intrinsic(llvm::Intrinsic::maxnum, {v, C(lo)}, {ft});
      xc = intrinsic(llvm::Intrinsic::minnum, {xc, C(hi_f)}, {ft});
      llvm::Type* i32 = reg_type(DType::I32, lanes);
      llvm::Value* r = b_.CreateFPToSI(xc, i32);
      if (hi_f < hi) {  // x >= 2^31 saturates to INT_MAX
        r = b_.CreateSelect(b_.CreateFCmpOGE(v, C(hi + 1)), llvm::ConstantInt::get(i32, static_cast<uint64_t>(static_cast<int64_t>(hi))), r);
      }
      r = b_.CreateSelect(b_.CreateFCmpUNO(v, v), llvm::Constant::getNullValue(i32), r);
      return bits < 32 ? b_.CreateTrunc(r, t) : r;
    }
    auto id = uns ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat;
    return intrinsic(id, {v}, {t, v->getType()});
  }

  // ---------------------------------------------------------------------------------------
  // [SECTION] expressions
  // ---------------------------------------------------------------------------------------

  llvm::Value* lookup_var(const std::string& name) {
    if (auto it = vars_.find(name); it != vars_.end()) {
      LATHE_CHECK(!it->second.array, "loop IR reads local array '" + name + "' as a scalar");
      return b_.CreateLoad(it->second.type, it->second.slot, name);
    }
    if (auto it = dims_.find(name); it != dims_.end()) return it->second;
    throw InternalError("llvm backend: unknown variable '" + name + "' in kernel " + lf_.name);
  }

  llvm::Value* from_memory(DType dt, int lanes, llvm::Value* v) {
    if (dt == DType::Bool) return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    if (dt == DType::F16) return b_.CreateFPExt(v, vec(b_.getFloatTy(), lanes));
    if (dt == DType::BF16) {
      llvm::Type* i32 = vec(b_.getInt32Ty(), lanes);
      return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, i32), llvm::ConstantInt::get(i32, 16)),
                              vec(b_.getFloatTy(), lanes));
    }
    return v;
  }
  llvm::Value* to_memory(DType dt, int lanes, llvm::Value* v) {
    if (dt == DType::Bool) return b_.CreateZExt(v, vec(b_.getInt8Ty(), lanes));
    if (dt == DType::F16) return b_.CreateFPTrunc(v, vec(b_.getHalfTy(), lanes));
    if (dt == DType::BF16) {
      llvm::Value* r = round_bf16(b_, v);
      llvm::Type* i32 = vec(b_.getInt32Ty(), lanes);
      return b_.CreateTrunc(b_.CreateLShr(b_.CreateBitCast(r, i32), llvm::ConstantInt::get(i32, 16)),
                            vec(b_.getInt16Ty(), lanes));
    }
    return v;
  }

  llvm::Value* emit(const ExprRef& e) {
    switch (e->kind) {
      case ExprKind::Const: {
        llvm::Type* t = scalar_type(e->dtype);
        llvm::Value* c = is_float(e->dtype) ? fconst(t, e->dtype == DType::BF16 ? e->f : e->f)
                                            : llvm::ConstantInt::get(t, static_cast<uint64_t>(e->i), !is_unsigned(e->dtype));
        return splat(c, e->lanes);
      }
      case ExprKind::Var: return splat(lookup_var(e->name), e->lanes);
      case ExprKind::Load: return emit_load(e);
      case ExprKind::LocalLoad: {
        Var& v = array_var(e->name);
        llvm::Value* idx = emit(e->args[0]);
        llvm::Value* p = b_.CreateGEP(v.type, v.slot, idx);
        if (e->lanes == v.lanes) return tag_access(b_.CreateLoad(v.type, p), -1);
        // a run of a scalar array starts at any element: the element's alignment, not the vector's
        return tag_access(b_.CreateAlignedLoad(reg_type(e->dtype, e->lanes), p, llvm::Align(dtype_size(e->dtype))), -1);
      }
      case ExprKind::Unary: return emit_unary(e);
      case ExprKind::Binary: return emit_binary(e);
      case ExprKind::Select: {
        llvm::Value* c = splat(emit(e->args[0]), e->lanes);
        return b_.CreateSelect(c, splat(emit(e->args[1]), e->lanes), splat(emit(e->args[2]), e->lanes));
      }
      case ExprKind::Cast: return emit_cast(e);
      case ExprKind::Broadcast: return splat(emit(e->args[0]), e->lanes);
      case ExprKind::Dot: return emit_dot(e);
    }
    throw InternalError("llvm backend: unknown expression kind");
  }

  // acc + grouped dot (loop IR Dot): vpdpbusd for u8 × i8 groups of 4 on VNNI hosts,
  // vpmaddwd for i16 pairs on AVX2 / AVX-512BW; otherwise widen, multiply and add the G
  // strided slices (exact either way: vpmaddwd's only overflow, 2 · (-2^15)^2, wraps to
  // the i32 sum the interpreter computes).
  llvm::Value* emit_dot(const ExprRef& e) {
    const int L = e->lanes, G = e->args[1]->lanes;
    DType ta = e->args[1]->dtype, tb = e->args[2]->dtype;
    llvm::Value* acc = emit(e->args[0]);
    llvm::Value* a = emit(e->args[1]);
    llvm::Value* b = emit(e->args[2]);
    llvm::Type* i32 = b_.getInt32Ty();
    auto group_splat = [&](llvm::Value* grp, llvm::Type* elt) {  // the G-group as one i32, repeated L times
      llvm::Value* word = b_.CreateBitCast(grp, i32);
      return b_.CreateBitCast(b_.CreateVectorSplat(L, word), vec(elt, G * L));
    };
    if (G == 2 && ta == DType::I16 && tb == DType::I16) {
      llvm::Value* av = group_splat(a, b_.getInt16Ty());
      if (L == 8 && host_has("avx2"))
        return b_.CreateAdd(acc, intrinsic(llvm::Intrinsic::x86_avx2_pmadd_wd, {av, b}, {}));
      if (L == 16 && host_has("avx512bw"))
        return b_.CreateAdd(acc, intrinsic(llvm::Intrinsic::x86_avx512_pmaddw_d_512, {av, b}, {}));
    }
    if (e->op == Op::Max) {  // saturating pairs (dot_acc sat16): vpmaddubsw, vpmaddwd by 1
      // the u8 side is vpmaddubsw's first operand: A's broadcast group, or B's columns (a conv)
      llvm::Value* aw = b_.CreateVectorSplat(L, b_.CreateBitCast(a, i32));
      const bool a_u8 = ta == DType::U8;
      auto pmadd = [&](int bytes) {
        llvm::Value* av = b_.CreateBitCast(aw, vec(b_.getInt8Ty(), bytes));
        auto id = bytes == 32 ? llvm::Intrinsic::x86_avx2_pmadd_ub_sw : llvm::Intrinsic::x86_avx512_pmaddubs_w_512;
        return a_u8 ? intrinsic(id, {av, b}, {}) : intrinsic(id, {b, av}, {});
      };
      if (L == 8 && host_has("avx2")) {
        llvm::Value* p16 = pmadd(32);
        llvm::Value* one = splat(llvm::ConstantInt::get(b_.getInt16Ty(), 1), 16);
        return b_.CreateAdd(acc, intrinsic(llvm::Intrinsic::x86_avx2_pmadd_wd, {p16, one}, {}));
      }
      if (L == 16 && host_has("avx512bw")) {
        llvm::Value* p16 = pmadd(64);
        llvm::Value* one = splat(llvm::ConstantInt::get(b_.getInt16Ty(), 1), 32);
        return b_.CreateAdd(acc, intrinsic(llvm::Intrinsic::x86_avx512_pmaddw_d_512, {p16, one}, {}));
      }
      // plain code: pair sums in i32, clamped to i16's range
      llvm::Value* a32 = a_u8 ? b_.CreateZExt(a, vec(i32, 4)) : b_.CreateSExt(a, vec(i32, 4));
      llvm::Value* b32 = a_u8 ? b_.CreateSExt(b, vec(i32, 4 * L)) : b_.CreateZExt(b, vec(i32, 4 * L));
      for (int j = 0; j < 4; j += 2) {
        llvm::Value* p = nullptr;
        for (int h = j; h < j + 2; ++h) {
          std::vector<int> bj(L), aj(L, h);
          for (int l = 0; l < L; ++l) bj[l] = l * 4 + h;
          llvm::Value* t = b_.CreateMul(b_.CreateShuffleVector(a32, aj), b_.CreateShuffleVector(b32, bj));
          p = p ? b_.CreateAdd(p, t) : t;
        }
        p = b_.CreateSelect(b_.CreateICmpSGT(p, splat(b_.getInt32(32767), L)), splat(b_.getInt32(32767), L), p);
        p = b_.CreateSelect(b_.CreateICmpSLT(p, splat(b_.getInt32(-32768), L)), splat(b_.getInt32(-32768), L), p);
        acc = b_.CreateAdd(acc, p);
      }
      return acc;
    }
    if (G == 4 && ta == DType::U8 && tb == DType::I8) {
      llvm::Value* aw = b_.CreateVectorSplat(L, b_.CreateBitCast(a, i32));
      llvm::Value* bw = b_.CreateBitCast(b, vec(i32, L));
      if (L == 8 && (host_has("avxvnni") || (host_has("avx512vnni") && host_has("avx512vl"))))
        return intrinsic(llvm::Intrinsic::x86_avx512_vpdpbusd_256, {acc, aw, bw}, {});
      if (L == 16 && host_has("avx512vnni"))
        return intrinsic(llvm::Intrinsic::x86_avx512_vpdpbusd_512, {acc, aw, bw}, {});
    }
    llvm::Value* a32 = is_unsigned(ta) ? b_.CreateZExt(a, vec(i32, G)) : b_.CreateSExt(a, vec(i32, G));
    llvm::Value* b32 = is_unsigned(tb) ? b_.CreateZExt(b, vec(i32, G * L)) : b_.CreateSExt(b, vec(i32, G * L));
    for (int j = 0; j < G; ++j) {
      std::vector<int> bj(L), aj(L, j);
      for (int l = 0; l < L; ++l) bj[l] = l * G + j;
      llvm::Value* x = b_.CreateShuffleVector(a32, aj);
      llvm::Value* y = b_.CreateShuffleVector(b32, bj);
      acc = b_.CreateAdd(acc, b_.CreateMul(x, y));
    }
    return acc;
  }

  Var& array_var(const std::string& name) {
    auto it = vars_.find(name);
    LATHE_CHECK(it != vars_.end() && it->second.array, "loop IR uses unknown local array '" + name + "'");
    return it->second;
  }

  llvm::Value* emit_load(const ExprRef& e) {
    const auto& bp = lf_.buffers.at(e->buffer);
    llvm::Value* base = buffer_ptrs_.at(e->buffer);
    llvm::Value* idx = emit(e->args[0]);
    const int scope = e->buffer;
    if (e->args.size() < 2) {
      llvm::Value* p = b_.CreateGEP(memory_type(bp.dtype), base, idx);
      if (e->lanes == 1) return from_memory(e->dtype, 1, tag_access(b_.CreateLoad(vec(memory_type(e->dtype), 1), p), scope));
      // a vector of a buffer starts at any element (B read in place by the matmul micro-kernel
      // at a row stride that is no multiple of the vector): the element's alignment
      return from_memory(e->dtype, e->lanes, tag_access(b_.CreateAlignedLoad(vec(memory_type(e->dtype), e->lanes), p, llvm::Align(dtype_size(e->dtype))), scope));
    }
    // masked: reads outside the mask give 0 and never touch memory
    llvm::Value* mask = emit(e->args[1]);
    llvm::Type* rt = reg_type(e->dtype, e->lanes);
    if (e->lanes == 1) {
      llvm::Value* safe = b_.CreateSelect(mask, idx, b_.getInt64(0));
      llvm::Value* v = from_memory(e->dtype, 1, tag_access(b_.CreateLoad(vec(memory_type(e->dtype), 1), b_.CreateGEP(memory_type(bp.dtype), base, safe)), scope));
      return b_.CreateSelect(mask, v, llvm::Constant::getNullValue(rt));
    }
    mask = splat(mask, e->lanes);
    llvm::Type* mt = vec(memory_type(e->dtype), e->lanes);
    llvm::Value* p = b_.CreateGEP(memory_type(bp.dtype), base, idx);
    llvm::Value* v = tag_access(b_.CreateMaskedLoad(mt, p, llvm::Align(dtype_size(e->dtype)), mask,
                                                    llvm::Constant::getNullValue(mt)), scope);
    return from_memory(e->dtype, e->lanes, v);
  }

  llvm::Value* emit_unary(const ExprRef& e) {
    llvm::Value* x = splat(emit(e->args[0]), e->lanes);
    DType dt = e->dtype;
    llvm::Type* t = x->getType();
    llvm::Value* r = nullptr;
    switch (e->op) {
      case Op::Neg: r = is_float(dt) ? b_.CreateFNeg(x) : b_.CreateNeg(x); break;
      case Op::Recip: r = b_.CreateFDiv(llvm::ConstantFP::get(t, 1.0), x); break;
      case Op::Sqrt: r = intrinsic(llvm::Intrinsic::sqrt, {x}, {t}); break;
      case Op::Sin: r = intrinsic(llvm::Intrinsic::sin, {x}, {t}); break;
      case Op::Exp2:
        r = t->getScalarType()->isFloatTy() ? exp2_f32(b_, x) : intrinsic(llvm::Intrinsic::exp2, {x}, {t});
        break;
      case Op::Log2:
        r = t->getScalarType()->isFloatTy() ? log2_f32(b_, x) : intrinsic(llvm::Intrinsic::log2, {x}, {t});
        break;
      case Op::Not: r = b_.CreateNot(x); break;
      default: throw InternalError("llvm backend: unary op " + std::string(op_name(e->op)));
    }
    return r;
  }

  llvm::Value* emit_binary(const ExprRef& e) {
    int lanes = e->lanes;
    llvm::Value* a = splat(emit(e->args[0]), lanes);
    llvm::Value* c = splat(emit(e->args[1]), lanes);
    DType dt = e->args[0]->dtype;
    bool fl = is_float(dt), uns = is_unsigned(dt);
    llvm::Type* t = a->getType();
    llvm::Value* r = nullptr;
    switch (e->op) {
      case Op::Add: case Op::Mul:
        if (fl) {
          r = e->op == Op::Add ? b_.CreateFAdd(a, c) : b_.CreateFMul(a, c);
          // inside a vectorized reduction loop the accumulation may be reordered (the
          // interpreter's tolerance allows it); elsewhere only FMA contraction
          llvm::FastMathFlags fmf;
          fmf.setAllowContract(true);
          if (reassoc_depth_ > 0) fmf.setAllowReassoc(true);
          if (auto* inst = llvm::dyn_cast<llvm::Instruction>(r)) inst->setFastMathFlags(fmf);  // constants fold
        } else if (dt == DType::Bool) {  // bool arithmetic is logical: + is or, * is and
          r = e->op == Op::Add ? b_.CreateOr(a, c) : b_.CreateAnd(a, c);
        } else {
          r = e->op == Op::Add ? b_.CreateAdd(a, c) : b_.CreateMul(a, c);
        }
        break;
      case Op::IDiv: case Op::Mod: {
        if (fl) {  // Mod on floats is fmod; IDiv is integer-only (checked by the verifier)
          r = b_.CreateFRem(a, c);
          break;
        }
        // x/0 = 0, x%0 = 0; x / -1 = -x and x % -1 = 0 (no INT_MIN/-1 trap)
        llvm::Value* zero = llvm::Constant::getNullValue(t);
        llvm::Value* is0 = b_.CreateICmpEQ(c, zero);
        llvm::Value* one = llvm::ConstantInt::get(t, 1);
        llvm::Value* safe = b_.CreateSelect(is0, one, c);
        if (uns) {
          r = e->op == Op::IDiv ? b_.CreateUDiv(a, safe) : b_.CreateURem(a, safe);
        } else {
          llvm::Value* ism1 = b_.CreateICmpEQ(safe, llvm::Constant::getAllOnesValue(t));
          safe = b_.CreateSelect(ism1, one, safe);
          llvm::Value* q = e->op == Op::IDiv ? b_.CreateSDiv(a, safe) : b_.CreateSRem(a, safe);
          llvm::Value* m1 = e->op == Op::IDiv ? b_.CreateNeg(a) : zero;
          r = b_.CreateSelect(ism1, m1, q);
        }
        r = b_.CreateSelect(is0, zero, r);
        break;
      }
      case Op::Max:
        if (fl) {
          // NaN propagates; the sign of a zero result is free (the interpreter's max of
          // -0 and +0 is either), which saves x86 three instructions per max
          r = intrinsic(llvm::Intrinsic::maximum, {a, c}, {t});
          llvm::FastMathFlags fmf;
          fmf.setNoSignedZeros(true);
          if (auto* inst = llvm::dyn_cast<llvm::Instruction>(r)) inst->setFastMathFlags(fmf);
        } else {
          r = intrinsic(uns ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, {a, c}, {t});
        }
        break;
      case Op::And: r = b_.CreateAnd(a, c); break;
      case Op::Or: r = b_.CreateOr(a, c); break;
      case Op::Xor: r = b_.CreateXor(a, c); break;
      case Op::CmpLT:
        r = fl ? b_.CreateFCmpOLT(a, c) : (uns ? b_.CreateICmpULT(a, c) : b_.CreateICmpSLT(a, c));
        return r;
      case Op::CmpNE: return fl ? b_.CreateFCmpUNE(a, c) : b_.CreateICmpNE(a, c);
      default: throw InternalError("llvm backend: binary op " + std::string(op_name(e->op)));
    }
    return r;
  }

  llvm::Value* emit_cast(const ExprRef& e) {
    DType from = e->args[0]->dtype, to = e->dtype;
    int lanes = e->lanes;
    llvm::Value* x = splat(emit(e->args[0]), lanes);
    llvm::Type* tt = reg_type(to, lanes);
    if (is_float(from) && is_float(to)) {
      llvm::Value* r = x;
      unsigned fw = x->getType()->getScalarSizeInBits(), tw = tt->getScalarSizeInBits();
      if (fw < tw) r = b_.CreateFPExt(x, tt);
      else if (fw > tw) r = b_.CreateFPTrunc(x, tt);
      else if (x->getType() != tt) r = b_.CreateFPCast(x, tt);
      return round_half(b_, to, r);
    }
    if (is_float(from)) return float_to_int(x, to, lanes);
    if (is_float(to)) {
      llvm::Value* r = is_unsigned(from) ? b_.CreateUIToFP(x, tt) : b_.CreateSIToFP(x, tt);
      return round_half(b_, to, r);
    }
    if (to == DType::Bool) return b_.CreateICmpNE(x, llvm::Constant::getNullValue(x->getType()));
    unsigned fw = x->getType()->getScalarSizeInBits(), tw = tt->getScalarSizeInBits();
    if (fw > tw) return b_.CreateTrunc(x, tt);
    if (fw < tw) return is_unsigned(from) ? b_.CreateZExt(x, tt) : b_.CreateSExt(x, tt);
    return x;
  }

  // ---------------------------------------------------------------------------------------
  // [SECTION] statements
  // ---------------------------------------------------------------------------------------

  void emit_stmts(const std::vector<Stmt>& body) {
    for (auto& s : body) emit_stmt(s);
  }

  void emit_stmt(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::For:
        if (s.annot.parallel && try_parallel(s)) return;
        emit_loop(s, b_.getInt64(0), emit(s.extent));
        return;
      case StmtKind::If: {
        auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
        auto* else_bb = llvm::BasicBlock::Create(ctx_, "else", fn_);
        auto* join = llvm::BasicBlock::Create(ctx_, "endif", fn_);
        b_.CreateCondBr(emit(s.cond), then_bb, else_bb);
        b_.SetInsertPoint(then_bb);
        emit_stmts(s.body);
        b_.CreateBr(join);
        b_.SetInsertPoint(else_bb);
        emit_stmts(s.else_body);
        b_.CreateBr(join);
        b_.SetInsertPoint(join);
        return;
      }
      case StmtKind::Store: {
        const auto& bp = lf_.buffers.at(s.buffer);
        int lanes = s.value->lanes;
        llvm::Value* v = to_memory(bp.dtype, lanes, emit(s.value));
        llvm::Value* p = b_.CreateGEP(memory_type(bp.dtype), buffer_ptrs_.at(s.buffer), emit(s.index));
        tag_access(b_.CreateStore(v, p), s.buffer);
        return;
      }
      case StmtKind::Let: {
        llvm::Value* v = emit(s.value);
        Var var;
        var.type = v->getType();
        var.dtype = s.dtype;
        var.lanes = s.value->lanes;
        var.slot = entry_alloca(var.type, s.var);
        b_.CreateStore(v, var.slot);
        vars_[s.var] = var;
        return;
      }
      case StmtKind::Assign: {
        auto it = vars_.find(s.var);
        LATHE_CHECK(it != vars_.end() && !it->second.array, "loop IR assigns unknown local '" + s.var + "'");
        llvm::Value* v = emit(s.value);
        if (v->getType() != it->second.type) v = splat(v, it->second.lanes);
        b_.CreateStore(v, it->second.slot);
        return;
      }
      case StmtKind::Alloc: {
        Var var;
        var.array = true;
        var.lanes = s.lanes;
        var.dtype = s.dtype;
        var.type = reg_type(s.dtype, s.lanes);
        const int64_t bytes = std::max<int64_t>(s.count, 1) * s.lanes * static_cast<int64_t>(dtype_size(s.dtype));
        if (!s.registers && bytes > kHeapScratchBytes) {  // off the stack: parallel.h
          llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
          auto* push_ty = llvm::FunctionType::get(b_.getPtrTy(), {b_.getInt64Ty()}, false);
          llvm::CallInst* p = eb.CreateCall(m_.getOrInsertFunction("lathe_llvm_scratch_push", push_ty), {eb.getInt64(bytes)}, s.var);
          p->addRetAttr(llvm::Attribute::NoAlias);
          p->addRetAttr(llvm::Attribute::getWithAlignment(ctx_, llvm::Align(64)));
          var.slot = p;
          ++scratch_pushes_;
        } else {
          var.slot = entry_alloca(var.type, s.var, b_.getInt64(std::max<int64_t>(s.count, 1)));
          llvm::cast<llvm::AllocaInst>(var.slot)->setAlignment(llvm::Align(64));
        }
        vars_[s.var] = var;
        return;
      }
      case StmtKind::Prefetch: {  // llvm.prefetch(address, rw, locality, data cache)
        const auto& bp = lf_.buffers.at(s.buffer);
        llvm::Value* p = b_.CreateGEP(memory_type(bp.dtype), buffer_ptrs_.at(s.buffer), emit(s.index));
        intrinsic(llvm::Intrinsic::prefetch, {p, b_.getInt32(s.write), b_.getInt32(s.locality), b_.getInt32(1)}, {p->getType()});
        return;
      }
      case StmtKind::LocalStore: {
        Var& v = array_var(s.var);
        llvm::Value* val = emit(s.value);
        if (s.value->lanes != v.lanes)  // a vector into a scalar array, at any element
          tag_access(b_.CreateAlignedStore(val, b_.CreateGEP(v.type, v.slot, emit(s.index)), llvm::Align(dtype_size(s.value->dtype))), -1);
        else
          tag_access(b_.CreateStore(val, b_.CreateGEP(v.type, v.slot, emit(s.index))), -1);
        return;
      }
    }
  }

  // for (var = begin; var < end; ++var) body — with llvm.loop hints from the annotation.
  void emit_loop(const Stmt& s, llvm::Value* begin, llvm::Value* end) {
    llvm::AllocaInst* iv = entry_alloca(b_.getInt64Ty(), s.var);
    Var saved;
    bool had = vars_.count(s.var);
    if (had) saved = vars_[s.var];
    vars_[s.var] = Var{iv, b_.getInt64Ty(), false, 1, DType::I64};
    b_.CreateStore(begin, iv);
    auto* cond = llvm::BasicBlock::Create(ctx_, s.var + ".cond", fn_);
    auto* body = llvm::BasicBlock::Create(ctx_, s.var + ".body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, s.var + ".exit", fn_);
    b_.CreateBr(cond);
    b_.SetInsertPoint(cond);
    llvm::Value* i = b_.CreateLoad(b_.getInt64Ty(), iv);
    b_.CreateCondBr(b_.CreateICmpSLT(i, end), body, exit);
    b_.SetInsertPoint(body);
    bool reassoc = s.annot.vectorize && !s.reduces.empty();
    reassoc_depth_ += reassoc;
    emit_stmts(s.body);
    reassoc_depth_ -= reassoc;
    llvm::Value* next = b_.CreateAdd(b_.CreateLoad(b_.getInt64Ty(), iv), b_.getInt64(1));
    b_.CreateStore(next, iv);
    llvm::BranchInst* latch = b_.CreateBr(cond);
    add_loop_metadata(latch, s.annot, shape_parametric());
    b_.SetInsertPoint(exit);
    if (had) vars_[s.var] = saved; else vars_.erase(s.var);
  }

  // Is this a shape-parametric code (kernel_param.h): has it dims with known bounds?
  bool shape_parametric() const {
    if (!ranges_) return false;
    for (auto& [lo, hi] : *ranges_)
      if (lo <= hi) return true;
    return false;
  }

  // param_trips: the loop is in a shape-parametric code, where most trip counts are known
  // only at run time. Such loops are not interleaved: with the trip count unknown the
  // vectorizer interleaves by 4 (and vectorizes a remainder), so a member's 14-iteration row
  // (32 lanes per step) ran all scalar, and the code compiled 2x bigger; a constant trip
  // count under 128 is not interleaved either.
  void add_loop_metadata(llvm::BranchInst* latch, const loop::LoopAnnot& a, bool param_trips = false) {
    std::vector<llvm::Metadata*> ops;
    ops.push_back(nullptr);  // self reference
    auto flag = [&](const char* name, llvm::Metadata* v) {
      ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, name), v}));
    };
    if (a.vectorize) flag("llvm.loop.vectorize.enable", llvm::ConstantAsMetadata::get(b_.getTrue()));
    if (a.vectorize && a.width > 0) {  // peel: one vector of `width` lanes per step, no interleave
      flag("llvm.loop.vectorize.width", llvm::ConstantAsMetadata::get(b_.getInt32(a.width)));
      flag("llvm.loop.interleave.count", llvm::ConstantAsMetadata::get(b_.getInt32(1)));
    }
    if (a.vectorize && a.masked)  // the peeled tail: one masked vector (tail folding)
      flag("llvm.loop.vectorize.predicate.enable", llvm::ConstantAsMetadata::get(b_.getTrue()));
    if (a.unroll > 1) flag("llvm.loop.unroll.count", llvm::ConstantAsMetadata::get(b_.getInt32(a.unroll)));
    if (param_trips) flag("llvm.loop.interleave.count", llvm::ConstantAsMetadata::get(b_.getInt32(1)));
    if (ops.size() == 1) return;
    llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, ops);
    md->replaceOperandWith(0, md);
    latch->setMetadata(llvm::LLVMContext::MD_loop, md);
  }

  // Outlines a parallel loop into a chunk function. Falls back to a serial loop (returns
  // false) when the body assigns a variable declared outside it (that would race).
  bool try_parallel(const Stmt& s) {
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

  static void collect_names(const ExprRef& e, std::set<std::string>& out) {
    if (!e) return;
    if (e->kind == ExprKind::Var || e->kind == ExprKind::LocalLoad) out.insert(e->name);
    for (auto& a : e->args) collect_names(a, out);
  }
};

}  // namespace

// -----------------------------------------------------------------------------------------
// [SECTION] module entry point
// -----------------------------------------------------------------------------------------

const char* emitter_build_id() { return __DATE__ " " __TIME__; }

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
    FunctionEmitter fe(*m, *lf, fn, r);
    fe.emit_kernel();
  }
  return m;
}

}  // namespace lathe::llvmjit
