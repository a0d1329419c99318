// emit_expr.cpp — loop IR expressions into LLVM values: loads (masked, vector; f16, bf16 and
// bool widened from memory), arithmetic with the interpreter's rules (x/0 = 0, NaN-propagating
// max, saturating float -> int), casts, and the integer dot (vpdpbusd, vpmaddwd, vpmaddubsw).
// See emit_function.h.
#include "backends/llvm/emit_function.h"
#include "backends/llvm/emit_math.h"
#include "backends/llvm/jit.h"

#include <llvm/IR/IntrinsicsX86.h>

#include <cmath>

#include "core/ir/diag.h"

namespace lathe::llvmjit::detail {

const char* emit_expr_stamp() { return __DATE__ " " __TIME__; }

// float -> integer: truncate toward zero, saturate, NaN -> 0 (the interpreter's rule).
llvm::Value* FunctionEmitter::float_to_int(llvm::Value* v, DType to, int lanes) {
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
  if (fs->isFloatTy() && bits == 8) {
    // f32 -> u8/i8 (every QuantizeLinear and requantizing epilogue; often scalar code that
    // LLVM's loop vectorizer widens): select(x > lo, x, lo) is x86's maxps, whose NaN gives
    // lo (u8's 0; i8 zeroes NaN first), then the min, and fptoui/fptosi straight to 8 bits,
    // which x86 lowers to cvttps2dq and two saturating packs. The i32 path below took a
    // compare, two packs and a blend for the NaN rule and 2 pshufb, an unpack and a mask load
    // for the narrowing trunc, every 8 values.
    auto C = [&](double x) { return splat(fconst(fs, x), lanes); };
    llvm::Value* x = v;
    if (!uns) x = b_.CreateSelect(b_.CreateFCmpORD(x, x), x, llvm::Constant::getNullValue(ft));
    llvm::Value* lo = C(uns ? 0.0 : -128.0);
    llvm::Value* hi = C(uns ? 255.0 : 127.0);
    x = b_.CreateSelect(b_.CreateFCmpOGT(x, lo), x, lo);
    x = b_.CreateSelect(b_.CreateFCmpOLT(x, hi), x, hi);
    return uns ? b_.CreateFPToUI(x, t) : b_.CreateFPToSI(x, t);
  }
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

llvm::Value* FunctionEmitter::lookup_var(const std::string& name) {
  if (auto it = vars_.find(name); it != vars_.end()) {
    LATHE_CHECK(!it->second.array, "loop IR reads local array '" + name + "' as a scalar");
    return b_.CreateLoad(it->second.type, it->second.slot, name);
  }
  if (auto it = dims_.find(name); it != dims_.end()) return it->second;
  throw InternalError("llvm backend: unknown variable '" + name + "' in kernel " + lf_.name);
}

llvm::Value* FunctionEmitter::from_memory(DType dt, int lanes, llvm::Value* v) {
  if (dt == DType::Bool) return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  if (dt == DType::F16) return b_.CreateFPExt(v, vec(b_.getFloatTy(), lanes));
  if (dt == DType::BF16) {
    llvm::Type* i32 = vec(b_.getInt32Ty(), lanes);
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, i32), llvm::ConstantInt::get(i32, 16)),
                            vec(b_.getFloatTy(), lanes));
  }
  return v;
}

llvm::Value* FunctionEmitter::to_memory(DType dt, int lanes, llvm::Value* v) {
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

llvm::Value* FunctionEmitter::emit(const ExprRef& e) {
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
llvm::Value* FunctionEmitter::emit_dot(const ExprRef& e) {
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
  // u8 × i8, or i8 × u8 (a conv's broadcast weights and u8 columns): vpdpbusd's unsigned
  // operand is the u8 side, its signed one the i8 side; each lane's group of 4 products is
  // the same sum either way round
  if (G == 4 && ((ta == DType::U8 && tb == DType::I8) || (ta == DType::I8 && tb == DType::U8))) {
    llvm::Value* aw = b_.CreateVectorSplat(L, b_.CreateBitCast(a, i32));
    llvm::Value* bw = b_.CreateBitCast(b, vec(i32, L));
    llvm::Value* u = ta == DType::U8 ? aw : bw;
    llvm::Value* sg = ta == DType::U8 ? bw : aw;
    if (L == 8 && (host_has("avxvnni") || (host_has("avx512vnni") && host_has("avx512vl"))))
      return intrinsic(llvm::Intrinsic::x86_avx512_vpdpbusd_256, {acc, u, sg}, {});
    if (L == 16 && host_has("avx512vnni"))
      return intrinsic(llvm::Intrinsic::x86_avx512_vpdpbusd_512, {acc, u, sg}, {});
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

Var& FunctionEmitter::array_var(const std::string& name) {
  auto it = vars_.find(name);
  LATHE_CHECK(it != vars_.end() && it->second.array, "loop IR uses unknown local array '" + name + "'");
  return it->second;
}

llvm::Value* FunctionEmitter::emit_load(const ExprRef& e) {
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

llvm::Value* FunctionEmitter::emit_unary(const ExprRef& e) {
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

// A dequantized product (loop::is_dequantize_product) is not contracted into an FMA: the
// interpreter rounds it on its own, and an FMA with the residual sum that reads it moved
// resnet50_qdq's u8 activations a step here and there from layer3 on (logits off by 1.0 of
// 151 on the optimized tier, 0.75 on the quick tier, whose O0 code generator fuses some).
// LATHE_LLVM_CONTRACT_DQ=1 lets them contract as before (A/B runs; contract_dequantize()).

llvm::Value* FunctionEmitter::emit_binary(const ExprRef& e) {
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
        fmf.setAllowContract(e->op == Op::Add || !loop::is_dequantize_product(*e) || contract_dequantize());
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

llvm::Value* FunctionEmitter::emit_cast(const ExprRef& e) {
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

}  // namespace lathe::llvmjit::detail
