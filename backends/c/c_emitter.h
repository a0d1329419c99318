// c_emitter.h — renders loop IR as C: the C-like emitter shared by the `c` backend and,
// through its virtual hooks, by the CUDA renderer (which overrides the function header,
// parallel loops → thread indices, and the prelude).
//
// Output of render_kernel() for a LoopFunc `k0_add`:
//   void k0_add(void* const* restrict lathe_bufs, const int64_t* restrict lathe_dims) {
//     float* restrict out = (float*)lathe_bufs[0];
//     const float* restrict in0 = (const float*)lathe_bufs[1];
//     #pragma omp parallel for simd schedule(static)
//     for (int64_t i0 = 0; i0 < 1024; ++i0) { out[i0] = in0[i0] + 1.0f; }
//   }
// The prelude defines the helpers the kernels call (NaN-propagating max, saturating
// float→int casts, guarded integer division, a vectorizable exp2f, vector types).
#pragma once
#include <map>
#include <sstream>
#include <string>

#include "core/loop/loop_ir.h"

namespace lathe {

class CEmitter {
 public:
  virtual ~CEmitter() = default;
  // Helpers and typedefs every kernel may use (once per translation unit).
  virtual std::string prelude() const;
  // One kernel as a C function named prefix + f.name.
  std::string render_kernel(const loop::LoopFunc& f, const std::string& prefix = "");
  // Why this emitter cannot render a dtype ("" = fine).
  virtual std::string dtype_unsupported(DType dt) const;

  std::string type(DType dt, int lanes = 1) const;  // in registers (f16 / bf16: float)
  std::string mem_type(DType dt) const;             // in buffers (f16 / bf16: uint16_t, their bits)
  std::string expr(const loop::ExprRef& e);

 protected:
  virtual std::string function_header(const loop::LoopFunc& f, const std::string& name) const;
  virtual void emit_for(const loop::Stmt& s, int depth);
  void emit_block(const std::vector<loop::Stmt>& body, int depth);
  void emit_stmt(const loop::Stmt& s, int depth);
  std::string literal(const loop::ExprRef& e) const;
  std::string round_to(DType dt, const std::string& x) const;
  std::string pad(int depth) const { return std::string(2 * depth, ' '); }

  const loop::LoopFunc* f_ = nullptr;
  std::ostringstream out_;
  std::map<std::string, const loop::Stmt*> allocs_;  // local arrays in scope
  std::map<std::string, DType> local_types_;         // scalar locals (for reduction clauses)
};

}  // namespace lathe
