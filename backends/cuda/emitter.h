// emitter.h — internal to backends/cuda: CudaEmitter, the loop-IR → CUDA C text writer
// (types and expressions in render_expr.cpp, statements and thread mapping in render.cpp).
//
// Why not the C backend's CEmitter: its type() and expr() are not virtual, and CUDA needs
// different answers there (f16/bf16 computed in float and rounded per op, __half storage,
// no GCC vector types, device math). The statement shapes are the same on purpose, so
// `--show source` reads alike for `c` and `cuda`.
#pragma once
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "backends/cuda/render.h"

namespace lathe::cuda {

class CudaEmitter {
 public:
  explicit CudaEmitter(const loop::LoopFunc& f) : f_(f) {}

  // storage type of a buffer element ("__half" for f16)
  static std::string storage_type(DType dt);
  // the type values of dt are computed in ("float" for f16/bf16)
  static std::string compute_type(DType dt);
  std::string expr(const loop::ExprRef& e);

  // statements (render.cpp)
  CudaKernel render(const RenderOptions& o);

 private:
  std::string literal(const loop::ExprRef& e) const;
  std::string round_to(DType dt, const std::string& float_expr) const;  // f16/bf16 rounding
  std::string cast_expr(const loop::ExprRef& e);
  std::string binary_expr(const loop::ExprRef& e);
  std::string combine_lambda(ReduceOp op, DType dt);

  void emit_block(const std::vector<loop::Stmt>& body, int depth);
  void emit_stmt(const loop::Stmt& s, int depth);
  void emit_for(const loop::Stmt& s, int depth);
  void emit_flat_loop(const std::vector<const loop::Stmt*>& chain, const std::string& start, const std::string& step,
                      int depth, const std::string& counter);
  void emit_chain_lets(const std::vector<const loop::Stmt*>& chain, int depth);
  void emit_coop_block(const std::vector<loop::Stmt>& body, int depth);
  // render_tiled.cpp: a contraction as a shared-memory tiled kernel; false (nothing
  // emitted) when the nest is not one.
  bool emit_tiled(const std::vector<const loop::Stmt*>& chain, const std::vector<loop::Stmt>& prefix, LaunchShape& L);
  std::string pad(int depth) const { return std::string(2 * depth, ' '); }

  const loop::LoopFunc& f_;
  std::ostringstream out_;
  std::map<std::string, const loop::Stmt*> allocs_;     // local arrays in scope
  std::set<std::string> half_accs_;                     // f16/bf16 accumulators kept in float
  std::string raw_acc_;                                 // accumulator read unrounded (its own combine)
  std::map<std::string, DType> coop_accs_;              // accumulators reduced across the block
  bool coop_ = false;                                   // inside a block-cooperative region
};

}  // namespace lathe::cuda
