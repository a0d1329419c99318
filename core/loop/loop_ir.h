// loop_ir.h — the loop IR: what one fused kernel does, as loops over scalar (or short
// vector) code. Small, typed, printable, and backend-neutral: the C, LLVM and CUDA
// renderers all start from it.
//
// A LoopFunc is one kernel: a list of buffer parameters (global memory, indexed by flat
// element index), the symbolic dims it needs at run time (passed as int64 values), and a
// body of statements. Every kernel has the same calling convention in every backend:
//     void kernel(void* const* buffers, const int64_t* dims)
// where buffers[p] is parameter p and dims[d] is the value of LoopFunc::dims[d].
//
// Expressions (Expr) are immutable trees shared by pointer; index arithmetic is i64 and
// uses the same Op codes as tensor math (Add, Mul, IDiv, Mod, Max, CmpLT, And …). The
// builders below fold constants and drop x+0, x*1, x*0, x/1, x%1 on the way, so index math
// from views comes out simplified. Statements (Stmt) are plain values that the schedule
// primitives (transform.h) copy and rewrite.
//
// Vectors: an Expr has `lanes` (1 = scalar). Vector values come from Broadcast, from
// contiguous loads (Load / LocalLoad with lanes > 1) and from element-wise ops on vectors;
// the matmul lowering uses them for its register-blocked micro-kernel. Dot is the integer
// micro-kernel's multiply-add (vpdpbusd / vpmaddwd on x86).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/ir/dtype.h"
#include "core/ir/ops.h"
#include "core/ir/symbolic.h"

namespace lathe::loop {

enum class ExprKind : uint8_t {
  Const,      // f (floats) / i (ints, bool)
  Var,        // a loop variable, a scalar local, or a runtime dim (all named)
  Load,       // buffer[args[0]] ; args[1] (optional, bool) = mask: false reads 0
  LocalLoad,  // local array `name`[args[0]] ; lanes > 1 on a scalar array: contiguous
  Unary,      // op(args[0]) — Neg Recip Sin Exp2 Log2 Sqrt Not
  Binary,     // op(args[0], args[1]) — Add Mul IDiv Mod Max And Or Xor CmpLT CmpNE
  Select,     // args[0] ? args[1] : args[2]
  Cast,       // convert args[0] to dtype
  Broadcast,  // a scalar args[0] repeated `lanes` times
  Dot,        // grouped integer dot, accumulating (the int8 GEMM micro-kernel): args[0] acc
              // (i32 × L) + Σ_j args[1][j] · args[2][l·G + j], args[1] G lanes (the same group
              // for every l), args[2] G·L lanes; integer operands, exact products, i32 wrapping sum;
              // op Max (dot_acc sat16): u8 × i8 or i8 × u8, G 4, each pair j = 0-1, 2-3 summed in an i16
              // that saturates (vpmaddubsw: ONNX Runtime's AVX2 int8 sums, qdq-sat16)
};

struct Expr;
using ExprRef = std::shared_ptr<const Expr>;

struct Expr {
  ExprKind kind;
  DType dtype;
  int lanes = 1;
  Op op = Op::Add;         // Unary / Binary
  double f = 0;            // Const (float dtypes)
  int64_t i = 0;           // Const (integer / bool dtypes)
  std::string name;        // Var, LocalLoad
  int buffer = -1;         // Load: index into LoopFunc::buffers
  std::vector<ExprRef> args;
};

// ---- expression builders (simplifying) ----------------------------------------------
ExprRef const_int(int64_t v, DType dt = DType::I64);
ExprRef const_float(double v, DType dt);
ExprRef const_of(double v, DType dt);   // a constant of any dtype (ints converted exactly)
ExprRef var(const std::string& name, DType dt = DType::I64, int lanes = 1);
ExprRef load(int buffer, DType dt, ExprRef index, ExprRef mask = nullptr, int lanes = 1);
ExprRef local_load(const std::string& name, DType dt, ExprRef index, int lanes = 1);
ExprRef unary(Op op, ExprRef a);
ExprRef binary(Op op, ExprRef a, ExprRef b);   // result dtype: bool for compares, else a's
ExprRef select(ExprRef c, ExprRef a, ExprRef b);
ExprRef cast(ExprRef a, DType dt);
ExprRef broadcast(ExprRef a, int lanes);
ExprRef dot_acc(ExprRef acc, ExprRef a, ExprRef b, bool sat16 = false);   // ExprKind::Dot
// index helpers (i64)
ExprRef add(ExprRef a, ExprRef b);
ExprRef mul(ExprRef a, ExprRef b);
ExprRef sub(ExprRef a, ExprRef b);
ExprRef lt(ExprRef a, ExprRef b);
ExprRef le(ExprRef a, ExprRef b);             // a <= b  ==  !(b < a)
ExprRef logical_and(ExprRef a, ExprRef b);    // nullptr acts as "true"
ExprRef min_of(ExprRef a, ExprRef b);
ExprRef from_sym(const SymInt& s);            // SymInt -> i64 expression over dim Vars

bool is_const(const ExprRef& e, int64_t v);
bool is_const(const ExprRef& e);
bool mentions(const ExprRef& e, const std::string& var_name);
ExprRef substitute(const ExprRef& e, const std::string& var_name, const ExprRef& with);
// The same kind of expression as e over new operands (simplifying, like the builders).
ExprRef with_args(const ExprRef& e, std::vector<ExprRef> args);
std::string expr_key(const ExprRef& e);  // structural key (for CSE)

// ---- statements -------------------------------------------------------------------------
enum class StmtKind : uint8_t {
  For,         // for var in [0, extent) { body }
  If,          // if (cond) { body } else { else_body }
  Store,       // buffer[index] = value         (value lanes > 1: contiguous store)
  Let,         // declare scalar local `var` of dtype = value (mutable: see Assign)
  Assign,      // local `var` = value
  Alloc,       // local array `var`: count × (dtype × lanes); heap for big ones
  LocalStore,  // local array `var`[index] = value
  Prefetch,    // a hint: buffer[index]'s cache line toward the core, for a read or a write
               // (`write`), at temporal locality `locality` (0 none … 3 keep in every level);
               // no value, never faults, may be dropped (a backend without prefetches)
};

// How a loop runs. Set by schedule primitives (transform.h); renderers honour them.
struct LoopAnnot {
  bool parallel = false;   // iterations spread over threads
  bool vectorize = false;  // SIMD across iterations (omp simd / LLVM vectorizer hint)
  int unroll = 0;          // 0 = leave to the compiler; n > 1 = unroll hint by n
  int width = 0;           // vectorized: SIMD width W, one vector per step (0 = compiler's choice; peel)
  bool masked = false;     // vectorized: the last partial vector runs masked, no scalar remainder (peel)
  bool scalar = false;     // not vectorized even by the compiler's own choice (short strided copies)
  int stride = 0;          // >= 2: the body is one copy dst[d0 + i] = src[s0 + stride * i] of a constant
                           // trip (a strided im2col panel); a backend may copy it as whole vectors
                           // deinterleaved (llvm), where its vectorizer left half to a scalar remainder
  int max_trip = 0;        // with stride: the trip is not constant but at most this (a run of a strided
                           // im2col panel); a backend may copy it as masked whole vectors
  int interleave = 0;      // vectorized: n > 1 vectors per step (llvm: the vectorizer's interleave count;
                           // a GEMM epilogue's tile row, NR = 2 vectors, as one straight body); 0 = the
                           // compiler's choice
  bool transpose = false;  // for j: for e: dst[d(j, e)] = src[s(j, e)] (mask m(j)): a tile transposed, the
                           // source unit-step in the inner e, the destination in the outer j; a
                           // backend may copy it as square blocks of vectors transposed in registers
                           // (both loops carry it: their trip counts stay constants in a
                           // shape-parametric code)
};

struct Stmt {
  StmtKind kind;
  std::string var;              // For: loop var; Let/Assign/Alloc/LocalStore: local name
  ExprRef extent;               // For
  ExprRef cond;                 // If
  ExprRef index;                // Store, LocalStore, Prefetch
  ExprRef value;                // Store, Let, Assign, LocalStore
  int buffer = -1;              // Store, Prefetch
  bool write = false;           // Prefetch: the line is to be written (else read)
  int locality = 3;             // Prefetch: 0 (no reuse) … 3 (keep in L1), as __builtin_prefetch
  DType dtype = DType::F32;     // Let, Alloc
  int lanes = 1;                // Alloc
  int64_t count = 0;            // Alloc: number of elements (of `lanes` each)
  bool registers = false;       // Alloc: small, constant-indexed: keep in registers
  LoopAnnot annot;              // For
  std::vector<std::string> reduces;  // For: accumulators (declared outside) it updates
  ReduceOp reduce_op = ReduceOp::Add;  // For with reduces: how they combine
  std::string note;             // For: what the loop is ("output dim 1", "reduce axis 2")
  std::vector<Stmt> body, else_body;
};

Stmt make_for(const std::string& var, ExprRef extent, std::vector<Stmt> body, std::string note = "");
Stmt make_if(ExprRef cond, std::vector<Stmt> body, std::vector<Stmt> else_body = {});
Stmt make_store(int buffer, ExprRef index, ExprRef value);
Stmt make_let(const std::string& var, DType dt, ExprRef value);
Stmt make_assign(const std::string& var, ExprRef value);
Stmt make_alloc(const std::string& var, DType dt, int lanes, int64_t count, bool registers = false);
Stmt make_local_store(const std::string& var, ExprRef index, ExprRef value);
// index: a scalar i64 element index of buffer; locality 0-3 (checked)
Stmt make_prefetch(int buffer, ExprRef index, bool write, int locality = 3);

// A buffer parameter of a kernel: a program buffer seen through this kernel.
struct BufferParam {
  int buffer = -1;        // program buffer id (Program::buffers)
  std::string name;       // "in0", "out", "x" … (a C identifier)
  DType dtype = DType::F32;
  bool written = false;
  int64_t offset = 0;     // elements past the buffer's start that the kernel is handed
                          // (constant base offsets moved out of its code: base_offsets.h)
};

struct LoopFunc {
  std::string name;                 // C identifier, unique in the program
  int kernel = -1;                  // index of the kernel it implements
  std::vector<BufferParam> buffers;
  std::vector<std::string> dims;    // runtime dim names, in dims[] order
  std::vector<Stmt> body;
  std::string kind;                 // "elementwise", "reduce", "matmul", "copy"
  std::vector<std::string> schedule_log;  // primitives applied, in order
  // operands that live inside the output (core/schedule/operand_place.h): buffer param
  // `param` at element `at` of the output's buffer; the memory plan must put them there
  struct Placed {
    int param = -1;
    int64_t at = 0;
  };
  std::vector<Placed> placed;
};

// Visits every statement, pre-order; fn returns false to skip a statement's children.
void walk(std::vector<Stmt>& body, const std::function<bool(Stmt&)>& fn);
void walk(const std::vector<Stmt>& body, const std::function<bool(const Stmt&)>& fn);
// Visits every expression of a statement tree (not recursing into sub-expressions).
void walk_exprs(const std::vector<Stmt>& body, const std::function<void(const ExprRef&)>& fn);
// A float product with an integer converted to float (f32(q − zp) · scale: a dequantized
// value, or an int8 sum's f32(acc) · scale). The backends keep it rounded on its own, as the
// interpreter rounds it, not contracted into an FMA with the sum that reads it: a requantized
// sum of two such products (a residual sum) would land on the other side of a half step now
// and then (resnet50_qdq's u8 activations, a step off from layer3 on).
bool is_dequantize_product(const Expr& e);
// Whether any expression of the function holds one (at any depth).
bool has_dequantize_product(const LoopFunc& f);
// Replaces a variable in every expression of a statement tree.
void substitute(std::vector<Stmt>& body, const std::string& var_name, const ExprRef& with);

}  // namespace lathe::loop
