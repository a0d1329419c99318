// emit_stmt.cpp — loop IR statements into LLVM IR: stores, locals and local arrays (alloca,
// or the scratch stack for big ones), prefetches, ifs and counted loops with their llvm.loop
// hints. See emit_function.h.
#include "backends/llvm/emit_function.h"
#include "backends/llvm/parallel.h"

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

#include <llvm/IR/MDBuilder.h>

#include "core/ir/diag.h"

namespace lathe::llvmjit::detail {

// LATHE_PACK_MASK_BITS=0: a strided run copy's masks (try_strided_copy) as vector compares of
// an index vector, as before, not scalar bit masks; =1: bit masks, but every chunk run (none
// skipped past the run's end) (A/B runs). Part of the build id (the cache key).
static const std::string& mask_mode() {
  static const std::string m = [] {
    const char* e = std::getenv("LATHE_PACK_MASK_BITS");
    return std::string(e ? e : "");
  }();
  return m;
}
static bool mask_bits() { return mask_mode() != "0"; }
static bool skip_chunks() { return mask_mode().empty(); }

const char* emit_stmt_stamp() {
  static const std::string s = std::string(__DATE__ " " __TIME__) + ";mask-" + mask_mode();
  return s.c_str();
}

void FunctionEmitter::emit_stmts(const std::vector<Stmt>& body) {
  for (auto& s : body) emit_stmt(s);
}

void FunctionEmitter::emit_stmt(const Stmt& s) {
  switch (s.kind) {
    case StmtKind::For:
      if (s.annot.parallel && try_parallel(s)) return;
      if ((s.annot.stride >= 2 || (s.annot.stride == 1 && s.annot.max_trip > 0)) && try_strided_copy(s)) return;
      if (s.annot.transpose && try_transpose_copy(s)) return;
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

// A strided copy (annot.stride, a strided window's im2col panel: dst[d0 + i] = src[s0 + S·i],
// i < T) as whole vectors: chunk j of L lanes loads the S·L consecutive elements from
// s0 + S·L·j and keeps lanes 0, S, 2S, ...; the last chunk starts S - 1 elements earlier and
// keeps lanes S - 1, 2S - 1, ..., so no load reaches past src[s0 + S·(T - 1)] (the reason
// LLVM's vectorizer ran the last L of them scalar). Straight-line: T is NR (16 or 32).
// A copy whose trip is not constant but at most annot.max_trip (a run of a strided panel)
// is copied, on an AVX-512 host, by ceil(max_trip / L) masked chunks of L = 16 lanes:
// chunk j of the n iterations loads the source elements [S·L·j, S·(n - 1)] of its span
// (masked: none past the last one read, so none outside the source), keeps every S-th
// and stores its min(L, n - L·j) lanes (masked); a chunk past n does nothing.
// The masks are bit masks made from the counts (c ones, c clamped to [0, W]: a scalar shift
// moved to a mask register): as compares of an index vector against n, 2 chunks x (a 32-lane
// load mask + a 16-lane store mask) were 12 vpcmpgtq + 6 kunpckbw a run, recomputed on every
// channel (no room in the 8 mask registers to keep a panel's 3 runs' masks), against the
// run's 4 loads, 2 permutes and 2 stores. A chunk past the run's end is branched over (the
// run's length is the same for a tap's channels: a predictable branch): runs of <= 16 columns,
// most of a 28-wide map's, ran a second chunk of masked-off loads and store. Runs of at most
// 8 (an A panel's MR rows, pack_taps) take chunks of L = 8; a variable trip may have S = 1 (a
// stride-1 window's run: masked load and store, no shuffle).
bool FunctionEmitter::try_strided_copy(const Stmt& s) {
  const int S = s.annot.stride;
  const bool var_trip = s.annot.max_trip > 0 && s.extent && s.extent->kind != loop::ExprKind::Const;
  if (var_trip && !host_has("avx512f")) return false;  // (AVX2's masked loads are slow: the vectorizer's copy)
  // (a run of at most 8 (an MR-tall panel's rows): chunks of 8 lanes, one source vector at S 2)
  const int L = var_trip ? (s.annot.max_trip <= 8 ? 8 : 16) : 8;
  if (!s.extent || (s.extent->kind != loop::ExprKind::Const && !var_trip) || s.body.size() != 1) return false;
  const int64_t T = var_trip ? s.annot.max_trip : s.extent->i;
  const Stmt& st = s.body[0];
  if (var_trip ? (S > 4 || T > 64 || T < 1) : (T % L != 0 || T / L < 2 || T > 64)) return false;
  if (st.kind != StmtKind::LocalStore || !st.value) return false;
  const ExprRef& ld = st.value;
  if (ld->kind != loop::ExprKind::Load || ld->lanes != 1 || ld->args.size() != 1 || ld->dtype != DType::F32) return false;
  const auto& bp = lf_.buffers.at(ld->buffer);
  if (bp.dtype != DType::F32) return false;
  Var& dst = array_var(st.var);
  if (dst.lanes != 1 || dst.dtype != DType::F32) return false;
  // the copy's affine parts: both indices at i = 0, and the steps the lowering promised
  ExprRef d0 = loop::substitute(st.index, s.var, loop::const_int(0));
  ExprRef s0 = loop::substitute(ld->args[0], s.var, loop::const_int(0));
  // (the builders do not cancel d0's terms in a difference, so also the form d0 + i, s0 + S·i)
  const ExprRef iv = loop::var(s.var);
  const bool d_step = loop::is_const(loop::sub(loop::substitute(st.index, s.var, loop::const_int(1)), d0), 1) ||
                      loop::expr_key(st.index) == loop::expr_key(loop::add(d0, iv));
  const bool s_step = loop::is_const(loop::sub(loop::substitute(ld->args[0], s.var, loop::const_int(1)), s0), S) ||
                      loop::expr_key(ld->args[0]) == loop::expr_key(loop::add(s0, loop::mul(iv, loop::const_int(S))));
  if (!d_step || !s_step) return false;
  llvm::Value* dbase = emit(d0);
  llvm::Value* sbase = emit(s0);
  llvm::Type* f32 = b_.getFloatTy();
  llvm::Type* wide = llvm::FixedVectorType::get(f32, S * L);
  if (var_trip) {
    llvm::Value* n = emit(s.extent);
    std::vector<llvm::Constant*> iw, il;
    for (int e = 0; e < S * L; ++e) iw.push_back(b_.getInt64(e));
    for (int l = 0; l < L; ++l) il.push_back(b_.getInt64(l));
    llvm::Value* iota_w = llvm::ConstantVector::get(iw);
    llvm::Value* iota_l = llvm::ConstantVector::get(il);
    std::vector<int> lanes;
    for (int l = 0; l < L; ++l) lanes.push_back(S * l);
    // the first `count` of W lanes (count <= 0: none), as <W x i1> (W <= 64)
    auto first_lanes = [&](llvm::Value* count, int W) -> llvm::Value* {
      llvm::Value* c = b_.CreateSelect(b_.CreateICmpSLT(count, b_.getInt64(0)), b_.getInt64(0), count);
      llvm::Value* ones = b_.CreateSub(b_.CreateShl(b_.getInt64(1), c), b_.getInt64(1));
      llvm::Value* bits = b_.CreateSelect(b_.CreateICmpSGE(c, b_.getInt64(W)), b_.getInt64(-1), ones);
      return b_.CreateBitCast(b_.CreateTrunc(bits, b_.getIntNTy(W)), llvm::FixedVectorType::get(b_.getInt1Ty(), W));
    };
    llvm::BasicBlock* done = nullptr;
    for (int64_t j = 0; j * L < T; ++j) {
      llvm::Value* r = b_.CreateSub(n, b_.getInt64(L * j));  // this chunk's iterations (may be <= 0)
      if (j > 0 && skip_chunks()) {  // none left: skip this chunk and the rest
        if (!done) done = llvm::BasicBlock::Create(ctx_, "runs.done", fn_);
        auto* more = llvm::BasicBlock::Create(ctx_, "runs.chunk", fn_);
        b_.CreateCondBr(b_.CreateICmpSGT(r, b_.getInt64(0)), more, done);
        b_.SetInsertPoint(more);
      }
      // source element e of the chunk is read iff e <= S·(r - 1); lane l is stored iff l < r
      llvm::Value* last = b_.CreateAdd(b_.CreateMul(r, b_.getInt64(S)), b_.getInt64(1 - S));
      llvm::Value* lmask = mask_bits() ? first_lanes(last, S * L) : b_.CreateICmpSLT(iota_w, b_.CreateVectorSplat(S * L, last));
      llvm::Value* smask = mask_bits() ? first_lanes(r, L) : b_.CreateICmpSLT(iota_l, b_.CreateVectorSplat(L, r));
      llvm::Value* p = b_.CreateGEP(f32, buffer_ptrs_.at(ld->buffer), b_.CreateAdd(sbase, b_.getInt64(S * L * j)));
      llvm::Value* v = tag_access(b_.CreateMaskedLoad(wide, p, llvm::Align(4), lmask, llvm::Constant::getNullValue(wide)), ld->buffer);
      llvm::Value* out = b_.CreateShuffleVector(v, lanes);
      llvm::Value* q = b_.CreateGEP(dst.type, dst.slot, b_.CreateAdd(dbase, b_.getInt64(L * j)));
      tag_access(b_.CreateMaskedStore(out, q, llvm::Align(4), smask), -1);
    }
    if (done) {
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    }
    return true;
  }
  for (int64_t j = 0; j < T / L; ++j) {
    const bool last = j == T / L - 1;
    const int64_t off = S * L * j - (last ? S - 1 : 0);
    llvm::Value* p = b_.CreateGEP(f32, buffer_ptrs_.at(ld->buffer), b_.CreateAdd(sbase, b_.getInt64(off)));
    llvm::Value* v = tag_access(b_.CreateAlignedLoad(wide, p, llvm::Align(4)), ld->buffer);
    std::vector<int> lanes;
    for (int l = 0; l < L; ++l) lanes.push_back((last ? S - 1 : 0) + S * l);
    llvm::Value* out = b_.CreateShuffleVector(v, lanes);
    llvm::Value* q = b_.CreateGEP(dst.type, dst.slot, b_.CreateAdd(dbase, b_.getInt64(L * j)));
    tag_access(b_.CreateAlignedStore(out, q, llvm::Align(4)), -1);
  }
  return true;
}

// A transposing copy (annot.transpose: for j < J: for e < E: dst[d(j, e)] = src[s(j, e)], the
// load masked by m(j); the fused attention's K tile) as blocks of L x L (16 on AVX-512): the
// block's L source rows j0 + r are loaded as vectors (s unit-step in e; a row whose mask is
// off, or past J, is zeros and reads nothing; the columns past E masked off), transposed in
// registers (log2 L stages of two-source shuffles, each swapping the off-diagonal h x h
// blocks of row pairs r, r + h) and stored as the rows e0 + l of the destination (d
// unit-step in j; the lanes past J masked off). LLVM's vectorizer scattered it element by
// element (vscatterqps, ~1.7 cycles an element). Returns false (the plain loops) where the
// body is not that copy.
bool FunctionEmitter::try_transpose_copy(const Stmt& s) {
  if (!host_has("avx512f")) return false;  // (AVX2: masked loads are slow; the vectorizer's copy)
  constexpr int L = 16;
  if (!s.extent || s.extent->kind != loop::ExprKind::Const || s.body.size() != 1) return false;
  const Stmt& in = s.body[0];
  if (in.kind != StmtKind::For || in.annot.parallel || !in.extent || in.extent->kind != loop::ExprKind::Const || in.body.size() != 1)
    return false;
  const int64_t J = s.extent->i, E = in.extent->i;
  if (J < 1 || E < 1) return false;
  const Stmt& st = in.body[0];
  if (st.kind != StmtKind::LocalStore || !st.value) return false;
  const ExprRef& ld = st.value;
  if (ld->kind != loop::ExprKind::Load || ld->lanes != 1 || ld->dtype != DType::F32 || ld->args.empty() || ld->args.size() > 2)
    return false;
  if (lf_.buffers.at(ld->buffer).dtype != DType::F32) return false;
  const ExprRef mask = ld->args.size() == 2 ? ld->args[1] : nullptr;
  if (mask && (mask->lanes != 1 || loop::mentions(mask, in.var))) return false;
  Var& dst = array_var(st.var);
  if (dst.lanes != 1 || dst.dtype != DType::F32) return false;
  // unit steps: the source in e, the destination in j (the affine forms the lowering promised)
  auto unit_step = [](const ExprRef& x, const std::string& v) {
    ExprRef x0 = loop::substitute(x, v, loop::const_int(0));
    return loop::is_const(loop::sub(loop::substitute(x, v, loop::const_int(1)), x0), 1) ||
           loop::expr_key(x) == loop::expr_key(loop::add(x0, loop::var(v)));
  };
  if (!unit_step(ld->args[0], in.var) || !unit_step(st.index, s.var)) return false;

  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* f32 = b_.getFloatTy();
  llvm::Type* vty = llvm::FixedVectorType::get(f32, L);
  llvm::Value* zero = llvm::Constant::getNullValue(vty);
  // j and e bound to slots the block sets before emitting an index
  std::vector<std::pair<std::string, std::optional<Var>>> saved;
  auto bind = [&](const std::string& name) {
    saved.emplace_back(name, vars_.count(name) ? std::optional<Var>(vars_[name]) : std::nullopt);
    llvm::AllocaInst* slot = entry_alloca(i64, name);
    vars_[name] = Var{slot, i64, false, 1, DType::I64};
    return slot;
  };
  llvm::AllocaInst* jslot = bind(s.var);
  llvm::AllocaInst* eslot = bind(in.var);
  auto first_lanes = [&](int n) {  // <L x i1>: the first n lanes
    std::vector<llvm::Constant*> m;
    for (int l = 0; l < L; ++l) m.push_back(b_.getInt1(l < n));
    return llvm::ConstantVector::get(m);
  };
  // the block at rows j0.. (R of them), columns e0.. (C of them)
  auto block = [&](llvm::Value* j0, llvm::Value* e0, int R, int C) {
    std::vector<llvm::Value*> v(L, zero);
    for (int r = 0; r < R; ++r) {
      b_.CreateStore(b_.CreateAdd(j0, b_.getInt64(r)), jslot);
      b_.CreateStore(e0, eslot);
      llvm::Value* p = b_.CreateGEP(f32, buffer_ptrs_.at(ld->buffer), emit(ld->args[0]));
      llvm::Value* m = nullptr;
      if (mask) {
        m = b_.CreateVectorSplat(L, emit(mask));
        if (C < L) m = b_.CreateAnd(m, first_lanes(C));
      } else if (C < L) {
        m = first_lanes(C);
      }
      llvm::Instruction* x = m ? static_cast<llvm::Instruction*>(b_.CreateMaskedLoad(vty, p, llvm::Align(4), m, zero))
                               : static_cast<llvm::Instruction*>(b_.CreateAlignedLoad(vty, p, llvm::Align(4)));
      v[r] = tag_access(x, ld->buffer);
    }
    for (int h = L / 2; h >= 1; h /= 2)
      for (int r = 0; r < L; ++r) {
        if (r & h) continue;
        std::vector<int> lo, hi;
        for (int l = 0; l < L; ++l) {
          lo.push_back((l & h) == 0 ? l : L + l - h);
          hi.push_back((l & h) == 0 ? l + h : L + l);
        }
        llvm::Value* a = b_.CreateShuffleVector(v[r], v[r + h], lo);
        llvm::Value* c = b_.CreateShuffleVector(v[r], v[r + h], hi);
        v[r] = a, v[r + h] = c;
      }
    for (int l = 0; l < C; ++l) {
      b_.CreateStore(j0, jslot);
      b_.CreateStore(b_.CreateAdd(e0, b_.getInt64(l)), eslot);
      llvm::Value* q = b_.CreateGEP(dst.type, dst.slot, emit(st.index));
      if (R < L) tag_access(b_.CreateMaskedStore(v[l], q, llvm::Align(4), first_lanes(R)), -1);
      else tag_access(b_.CreateAlignedStore(v[l], q, llvm::Align(4)), -1);
    }
  };
  // for (i = 0; i < n; ++i) body(i), not vectorized (a block is vectors already)
  auto counted = [&](int64_t n, const std::string& name, const std::function<void(llvm::Value*)>& body) {
    if (n <= 0) return;
    if (n == 1) return body(b_.getInt64(0));
    llvm::AllocaInst* iv = entry_alloca(i64, name);
    b_.CreateStore(b_.getInt64(0), iv);
    auto* cond = llvm::BasicBlock::Create(ctx_, name + ".cond", fn_);
    auto* bb = llvm::BasicBlock::Create(ctx_, name + ".body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, name + ".exit", fn_);
    b_.CreateBr(cond);
    b_.SetInsertPoint(cond);
    b_.CreateCondBr(b_.CreateICmpSLT(b_.CreateLoad(i64, iv), b_.getInt64(n)), bb, exit);
    b_.SetInsertPoint(bb);
    body(b_.CreateLoad(i64, iv));
    b_.CreateStore(b_.CreateAdd(b_.CreateLoad(i64, iv), b_.getInt64(1)), iv);
    llvm::BranchInst* latch = b_.CreateBr(cond);
    loop::LoopAnnot a;
    a.scalar = true;
    add_loop_metadata(latch, a);
    b_.SetInsertPoint(exit);
  };
  auto blocks_at = [&](llvm::Value* j0, int R) {  // a row of blocks: E columns
    counted(E / L, "tr.e", [&](llvm::Value* eb) { block(j0, b_.CreateMul(eb, b_.getInt64(L)), R, L); });
    if (E % L) block(j0, b_.getInt64(E / L * L), R, (int)(E % L));
  };
  counted(J / L, "tr.j", [&](llvm::Value* jb) { blocks_at(b_.CreateMul(jb, b_.getInt64(L)), L); });
  if (J % L) blocks_at(b_.getInt64(J / L * L), (int)(J % L));
  for (auto& [name, v] : saved) {
    if (v) vars_[name] = *v;
    else vars_.erase(name);
  }
  return true;
}

// for (var = begin; var < end; ++var) body — with llvm.loop hints from the annotation.
void FunctionEmitter::emit_loop(const Stmt& s, llvm::Value* begin, llvm::Value* end) {
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
bool FunctionEmitter::shape_parametric() const {
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
void FunctionEmitter::add_loop_metadata(llvm::BranchInst* latch, const loop::LoopAnnot& a, bool param_trips) {
  std::vector<llvm::Metadata*> ops;
  ops.push_back(nullptr);  // self reference
  auto flag = [&](const char* name, llvm::Metadata* v) {
    ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, name), v}));
  };
  if (a.vectorize) flag("llvm.loop.vectorize.enable", llvm::ConstantAsMetadata::get(b_.getTrue()));
  if (a.scalar && !a.vectorize) flag("llvm.loop.vectorize.enable", llvm::ConstantAsMetadata::get(b_.getFalse()));
  if (a.vectorize && a.width > 0) {  // peel: one vector of `width` lanes per step, no interleave
    flag("llvm.loop.vectorize.width", llvm::ConstantAsMetadata::get(b_.getInt32(a.width)));
    flag("llvm.loop.interleave.count", llvm::ConstantAsMetadata::get(b_.getInt32(1)));
  }
  if (a.vectorize && a.masked)  // the peeled tail: one masked vector (tail folding)
    flag("llvm.loop.vectorize.predicate.enable", llvm::ConstantAsMetadata::get(b_.getTrue()));
  if (a.vectorize && a.interleave > 1 && !param_trips)
    flag("llvm.loop.interleave.count", llvm::ConstantAsMetadata::get(b_.getInt32(a.interleave)));
  if (a.unroll > 1) flag("llvm.loop.unroll.count", llvm::ConstantAsMetadata::get(b_.getInt32(a.unroll)));
  if (param_trips) flag("llvm.loop.interleave.count", llvm::ConstantAsMetadata::get(b_.getInt32(1)));
  if (ops.size() == 1) return;
  llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, ops);
  md->replaceOperandWith(0, md);
  latch->setMetadata(llvm::LLVMContext::MD_loop, md);
}

}  // namespace lathe::llvmjit::detail
