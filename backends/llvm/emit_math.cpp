// emit_math.cpp — the llvm backend's math helpers: exp2/log2 polynomials for f32 and the
// rounding of f32 registers to half precision. See emit_math.h.
#include "backends/llvm/emit_math.h"

#include <cmath>
#include <cstdlib>
#include <string>

namespace lathe::llvmjit {

const char* detail::emit_math_stamp() {
  static const std::string s = std::string(__DATE__ " " __TIME__) + (fast_exp2() ? "" : ";exp2-v1");
  return s.c_str();
}

namespace {

llvm::Type* vec(llvm::Type* t, int lanes) { return lanes == 1 ? t : llvm::FixedVectorType::get(t, lanes); }

llvm::Value* splat(llvm::IRBuilder<>& b_, llvm::Value* v, int lanes) {
  if (lanes == 1 || v->getType()->isVectorTy()) return v;
  return b_.CreateVectorSplat(lanes, v);
}

llvm::Value* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }

llvm::Value* intrinsic(llvm::IRBuilder<>& b_, llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Value*> args,
                       llvm::ArrayRef<llvm::Type*> tys) {
  return b_.CreateIntrinsic(id, tys, args);
}

}  // namespace

// Rounds an f32 value to bf16 precision (nearest even), staying in f32. NaN stays NaN.
llvm::Value* round_bf16(llvm::IRBuilder<>& b_, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Type* it = ft->isVectorTy() ? vec(b_.getInt32Ty(), llvm::cast<llvm::FixedVectorType>(ft)->getNumElements())
                                    : b_.getInt32Ty();
  llvm::Value* bits = b_.CreateBitCast(x, it);
  llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, llvm::ConstantInt::get(it, 16)), llvm::ConstantInt::get(it, 1));
  llvm::Value* r = b_.CreateAdd(bits, b_.CreateAdd(llvm::ConstantInt::get(it, 0x7fff), lsb));
  r = b_.CreateAnd(r, llvm::ConstantInt::get(it, 0xffff0000u));
  llvm::Value* nan = b_.CreateFCmpUNO(x, x);
  return b_.CreateSelect(nan, x, b_.CreateBitCast(r, ft));
}

// Rounds an f32 register value to the precision of a half type (f16/bf16), staying f32.
llvm::Value* round_half(llvm::IRBuilder<>& b_, DType dt, llvm::Value* x) {
  if (dt == DType::BF16) return round_bf16(b_, x);
  if (dt != DType::F16) return x;
  llvm::Type* ht = x->getType()->isVectorTy()
                       ? vec(b_.getHalfTy(), llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements())
                       : b_.getHalfTy();
  return b_.CreateFPExt(b_.CreateFPTrunc(x, ht), x->getType());
}

// LATHE_EXP2_FAST=0: the previous 2^x (degree-6 Taylor polynomial, NaN by a final select,
// 2^n by two multiplies), for A/B runs. Part of the emitter's build id (the cache key).
bool fast_exp2() {
  static const bool on = [] {
    const char* e = std::getenv("LATHE_EXP2_FAST");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

namespace {

// 2^x, the previous form (LATHE_EXP2_FAST=0): x = n + f, f in [-0.5, 0.5]; 2^f by the
// degree-6 Taylor polynomial (max rel. error ~1.6e-7); 2^n as two exponent-field factors;
// NaN by a final select. 22 vector instructions on AVX2.
llvm::Value* exp2_f32_v1(llvm::IRBuilder<>& b_, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  int lanes = ft->isVectorTy() ? llvm::cast<llvm::FixedVectorType>(ft)->getNumElements() : 1;
  llvm::Type* it = vec(b_.getInt32Ty(), lanes);
  llvm::Type* st = b_.getFloatTy();
  auto C = [&](double v) { return splat(b_, fconst(st, v), lanes); };
  llvm::Value* xc = intrinsic(b_, llvm::Intrinsic::minnum, {x, C(128.0)}, {ft});
  xc = intrinsic(b_, llvm::Intrinsic::maxnum, {xc, C(-150.0)}, {ft});
  llvm::Value* n = intrinsic(b_, llvm::Intrinsic::rint, {xc}, {ft});
  llvm::Value* f = b_.CreateFSub(xc, n);
  const double c[] = {1.0, 0.6931471805599453, 0.2402265069591007, 0.05550410866482158,
                      0.009618129107628477, 0.0013333558146428443, 0.00015403530393381609};
  llvm::Value* p = C(c[6]);
  for (int i = 5; i >= 0; --i) p = intrinsic(b_, llvm::Intrinsic::fma, {p, f, C(c[i])}, {ft});
  llvm::Value* ni = b_.CreateFPToSI(n, it);
  llvm::Value* n1 = b_.CreateAShr(ni, llvm::ConstantInt::get(it, 1));
  llvm::Value* n2 = b_.CreateSub(ni, n1);
  auto pow2 = [&](llvm::Value* k) {
    return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(k, llvm::ConstantInt::get(it, 127)), llvm::ConstantInt::get(it, 23)), ft);
  };
  llvm::Value* r = b_.CreateFMul(b_.CreateFMul(p, pow2(n1)), pow2(n2));
  llvm::Value* nan = b_.CreateFCmpUNO(x, x);
  return b_.CreateSelect(nan, x, r);
}

}  // namespace

// 2^x for f32 (scalar or vector): x = n + f, f in [-0.5, 0.5]; 2^f = 1 + f·q(f), q a
// degree-4 minimax fit of the relative error (max rel. error 1.1e-7 with f32 coefficients,
// below the degree-6 Taylor form's 1.6e-7); 2^n as two exponent-field factors (n in
// [-150, 128] gives subnormals and inf as the hardware rounds them). Saturates to 0 / inf
// outside [-150, 128]. NaN passes through the clamps (each the select `c < x ? c : x`, one
// minps/maxps on x86, which returns its second operand, x, when either is NaN) and stays NaN
// through the polynomial and both multiplies, whatever the factors (n's integer from a NaN
// is frozen: LLVM's poison): no final compare and select. 18 vector instructions on AVX2
// (the previous form: 22).
llvm::Value* exp2_f32(llvm::IRBuilder<>& b_, llvm::Value* x) {
  if (!fast_exp2()) return exp2_f32_v1(b_, x);
  llvm::Type* ft = x->getType();
  int lanes = ft->isVectorTy() ? llvm::cast<llvm::FixedVectorType>(ft)->getNumElements() : 1;
  llvm::Type* it = vec(b_.getInt32Ty(), lanes);
  llvm::Type* st = b_.getFloatTy();
  auto C = [&](double v) { return splat(b_, fconst(st, v), lanes); };
  auto I = [&](int64_t v) { return llvm::ConstantInt::get(it, v); };
  // min(x, 128), max(·, -150), x where x is NaN
  llvm::Value* xc = b_.CreateSelect(b_.CreateFCmpOLT(C(128.0), x), C(128.0), x);
  xc = b_.CreateSelect(b_.CreateFCmpOGT(C(-150.0), xc), C(-150.0), xc);
  llvm::Value* n = intrinsic(b_, llvm::Intrinsic::rint, {xc}, {ft});
  llvm::Value* f = b_.CreateFSub(xc, n);
  const double c[] = {0.0013264742447063327, 0.00967151764780283, 0.05550733581185341, 0.24022242426872253,
                      0.6931470036506653, 1.0};
  llvm::Value* p = C(c[0]);
  for (int i = 1; i < 6; ++i) p = intrinsic(b_, llvm::Intrinsic::fma, {p, f, C(c[i])}, {ft});
  llvm::Value* ni = b_.CreateFreeze(b_.CreateFPToSI(n, it));
  llvm::Value* n1 = b_.CreateAShr(ni, I(1));
  llvm::Value* n2 = b_.CreateSub(ni, n1);
  auto pow2 = [&](llvm::Value* k) { return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(k, I(127)), I(23)), ft); };
  return b_.CreateFMul(b_.CreateFMul(p, pow2(n1)), pow2(n2));
}

// log2(x) for f32: x = m * 2^e with m in [sqrt(.5), sqrt(2)); log2(m) via
// log((1+s)/(1-s)) series in s = (m-1)/(m+1). Special cases: 0 -> -inf, <0/NaN -> NaN,
// inf -> inf; subnormals are scaled first.
llvm::Value* log2_f32(llvm::IRBuilder<>& b_, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  int lanes = ft->isVectorTy() ? llvm::cast<llvm::FixedVectorType>(ft)->getNumElements() : 1;
  llvm::Type* it = vec(b_.getInt32Ty(), lanes);
  llvm::Type* st = b_.getFloatTy();
  auto C = [&](double v) { return splat(b_, fconst(st, v), lanes); };
  auto I = [&](int64_t v) { return llvm::ConstantInt::get(it, v); };
  llvm::Value* sub = b_.CreateFCmpOLT(x, C(1.17549435e-38));
  llvm::Value* xs = b_.CreateSelect(sub, b_.CreateFMul(x, C(8388608.0)), x);  // * 2^23
  llvm::Value* bits = b_.CreateBitCast(xs, it);
  llvm::Value* e = b_.CreateSub(b_.CreateLShr(bits, I(23)), I(127));
  llvm::Value* mbits = b_.CreateOr(b_.CreateAnd(bits, I(0x007fffff)), I(0x3f800000));
  llvm::Value* m = b_.CreateBitCast(mbits, ft);  // [1, 2)
  llvm::Value* big = b_.CreateFCmpOGT(m, C(1.41421356237));
  m = b_.CreateSelect(big, b_.CreateFMul(m, C(0.5)), m);
  e = b_.CreateSelect(big, b_.CreateAdd(e, I(1)), e);
  llvm::Value* ef = b_.CreateSIToFP(e, ft);
  ef = b_.CreateSelect(sub, b_.CreateFSub(ef, C(23.0)), ef);
  llvm::Value* s = b_.CreateFDiv(b_.CreateFSub(m, C(1.0)), b_.CreateFAdd(m, C(1.0)));
  llvm::Value* s2 = b_.CreateFMul(s, s);
  // 2*atanh(s) = 2(s + s^3/3 + s^5/5 + …), |s| <= 0.1716
  const double c[] = {2.0, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11};
  llvm::Value* p = C(c[5]);
  for (int i = 4; i >= 0; --i) p = intrinsic(b_, llvm::Intrinsic::fma, {p, s2, C(c[i])}, {ft});
  llvm::Value* ln = b_.CreateFMul(p, s);
  llvm::Value* r = intrinsic(b_, llvm::Intrinsic::fma, {ln, C(1.4426950408889634), ef}, {ft});
  r = b_.CreateSelect(b_.CreateFCmpOEQ(x, C(0.0)), C(-INFINITY), r);
  r = b_.CreateSelect(b_.CreateFCmpOEQ(x, C(INFINITY)), x, r);
  r = b_.CreateSelect(b_.CreateFCmpULT(x, C(0.0)), C(NAN), r);  // also NaN inputs
  return r;
}

}  // namespace lathe::llvmjit
