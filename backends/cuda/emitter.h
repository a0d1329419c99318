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
#include <utility>

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
  // `extern "C" __global__ void NAME(` the buffers (const unless written, __restrict__), then the dims as long long,
  // `) {` and a newline: every kernel's parameters in the order the launcher passes them (render.cpp)
  std::string signature();

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
  // render.cpp: which buffers of a block-per-row region to keep in registers (row_cache_)
  void plan_row_cache(const std::vector<loop::Stmt>& body, int block);
  void emit_row_cache_fill(const loop::Stmt& loop, int depth);
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
  bool split_k_ = true;                                 // RenderOptions::split_k
  std::pair<int, int> forced_tile_{0, 0};               // LATHE_CUDA_TILE=TMxTN (4 or 8 each)
  std::string globals_;                                 // module-scope declarations the kernel uses

  // A row of a buffer that several loops of a block-per-row region touch at the same
  // elements (softmax reads x twice and its output twice): each thread keeps its
  // elements in a register array, so the row crosses global memory once each way.
  struct RowCache {
    std::string name;                              // lathe_row<param>
    std::set<const loop::Stmt*> loops;             // region loops that touch the row
    std::map<const loop::Stmt*, loop::ExprRef> fill;  // loops that load it: one of their loads
    const loop::Stmt* last_store = nullptr;        // the loop whose stores reach global memory
    bool valid = false;                            // holds the row (a loop before loaded/stored it)
  };
  std::map<int, RowCache> row_cache_;                   // by buffer param
  const loop::Stmt* row_loop_ = nullptr;                // the region loop being emitted
  int64_t row_n_ = 0, row_iters_ = 0;                   // its flat extent; iterations per thread
  int row_block_ = 0;                                   // the block size the region assumes
};

}  // namespace lathe::cuda
