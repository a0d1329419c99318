// lower_matmul_impl.h — private to the packed matmul lowering (lower_matmul*.cpp): the
// MatmulLowering class that builds one kernel's GEMM nest, its state and its parts.
//
//   lower_matmul.cpp        the driver: sizes and blocks, the job nest, which side is packed
//                           where, the write-back (and epilogue), operand addressing
//   lower_matmul_pack.cpp   packing A and B (the implicit im2col of a window, run by run),
//                           B read in place, the window's interior panels, the shared pack
//   lower_matmul_pack_int8.cpp  the integer (group-of-G) packs: B run by run a group of k at
//                           a time, A's contiguous or gathered panels over a window's rows
//   lower_matmul_micro.cpp  the f32 and int8 micro-kernels (register tiles, the ragged
//                           A panel's kernel, sums kept in tiles across K blocks)
//
// run() fills the members below in order (sizes, blocks, then which operand is packed where)
// before the packing and micro-kernel builders read them; the emitted loop IR is their
// composition, nothing here is shared between kernels.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/loop/lower.h"
#include "core/loop/loop_ir.h"
#include "core/loop/matmul_epilogue.h"

namespace lathe::loop::matmul_lowering {

inline ExprRef ceil_div(ExprRef a, int64_t b) { return binary(Op::IDiv, add(a, const_int(b - 1)), const_int(b)); }
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

inline SymInt product(const Shape& s, const std::vector<int>& dims) {
  SymInt p = 1;
  for (int d : dims) p = p * s[d];
  return p;
}

// the most rows of A for which a 1x1 convolution's B may be read in place (lower_matmul_pack.cpp)
int64_t b_in_place_max_m(const MatmulParams& P);
// B read in place runs its ragged last panel with the ragged-columns kernel (lower_matmul_micro.cpp)
bool ragged_cols_in_place();

class MatmulLowering {
 public:
  MatmulLowering(const KernelGraph& kg, const Kernel& k, const MatmulMatch& mm, const MatmulParams& P)
      : kg_(kg), k_(k), mm_(mm), P_(P), s_(mm.mul->shape) {}

  LoopFunc run();

 private:
  // ---- operand addressing (lower_matmul.cpp) ----

  // A group part read from a table filled for local indices [0, count) at flat index base+i,
  // when it is not affine in the flat index; else inline index math. Fill loops go to `fill`.
  struct Part {
    std::string table;  // "" = inline
    const Affine* a = nullptr;
    const std::vector<int>* g = nullptr;
    ExprRef base;
  };
  // address and mask of one operand element from its row-group part and K part
  struct OperandParts {
    const OperandAccess* acc = nullptr;
    std::vector<Part> rows, ks;  // [0] address, [1 + j] bound j
  };

  int add_param(int buffer, bool written, const std::string& name);
  // The coefficient of a group's innermost dim when `a` is affine in the group's flat index.
  std::optional<SymInt> collapsed(const Affine& a, const std::vector<int>& g) const;
  bool uses_any(const Affine& a, const std::vector<int>& g) const;
  // part of `a` over group g at flat index f, as index math (div/mod when not collapsible)
  ExprRef part(const Affine& a, const std::vector<int>& g, ExprRef f) const;
  ExprRef batch_part(const Affine& a) const { return add(from_sym(a.c0), affine_part(a, batch_)); }
  Part make_part(const Affine& a, const std::vector<int>& g, ExprRef base, ExprRef count, int64_t cap,
                 std::vector<Stmt>& fill, std::vector<Stmt>& allocs);
  ExprRef at(const Part& p, ExprRef local) const;
  OperandParts make_parts(const OperandAccess& acc, const std::vector<int>& rows, ExprRef rbase, ExprRef rcount,
                          int64_t rcap, std::vector<Stmt>& rfill, ExprRef kbase, ExprRef kcount, std::vector<Stmt>& kfill,
                          std::vector<Stmt>& allocs);
  ExprRef address(const OperandParts& o, ExprRef row, ExprRef kk) const;
  ExprRef in_range(const OperandParts& o, ExprRef row, ExprRef kk) const;
  // Bp / Ap element of panel p, depth kk, column / row c
  ExprRef panel_index(ExprRef p, ExprRef kk, ExprRef c, int64_t width) const;
  // the same for depth kg·G + j, group kg and member j given apart
  ExprRef group_panel_index(ExprRef p, ExprRef kg, int j, ExprRef c, int64_t width) const;
  // a packed element: the operand's value (floats) or it widened to the panel's type
  ExprRef packed(int param, NodeRef src, DType to, ExprRef addr, ExprRef mask) const;
  // Coefficient of dim d in `a` when it is a non-negative constant.
  static std::optional<int64_t> coef_of(const Affine& a, int d);

  // ---- the driver's steps (lower_matmul.cpp) ----
  void setup();                                   // params, dtypes, sizes, blocks
  Stmt write_back(ExprRef colpart);               // C (+)= tile, the epilogue at the last K block
  void add_write_back(std::vector<Stmt>& micro);  // write_back per column layout, loop names

  // ---- packing (lower_matmul_pack.cpp) ----
  bool b_columns_contiguous() const;
  bool reads_b_in_place(const OperandParts& B, const SymInt& Ms, const SymInt& Ks) const;
  int expected_ragged_q() const;
  bool reads_a_in_place(const OperandParts& A) const;
  struct WindowInPlace {
    std::vector<int64_t> cb, kmin, kmax;  // per bound: the coefficient along a run, the k part's range
    int64_t ca = 1;                       // the address's coefficient along a run
    bool in_place = false;                // interior panels read by the micro-kernel (else packed)
  };
  static const std::string& in_place_mode();
  std::optional<WindowInPlace> window_in_place(const OperandParts& B, const SymInt& Ms) const;
  ExprRef window_interior(const OperandParts& B, const WindowInPlace& w, ExprRef p0) const;
  static constexpr int64_t kSharedPackMaxBytes = int64_t(3) << 20, kSharedPackMinWaste = int64_t(1) << 15;
  static constexpr int64_t kSharedPackParallelMin = int64_t(1) << 16;  // elements
  int64_t shared_elems(int64_t rows, int64_t K, int64_t width) const;
  bool shares_pack(const SymInt& rows, const SymInt& Ks, const SymInt& batch, int64_t copies, int64_t width) const;
  Stmt shared_pack_loop(const OperandAccess& acc, const std::vector<int>& axes, int64_t rows, int64_t K, int64_t width,
                        int64_t max_panels, int threads, const std::string& r0, const std::string& rc,
                        const std::string& local, const std::string& shared, int64_t table_pad,
                        const std::function<Stmt(const OperandParts&)>& make_pack);
  std::optional<Stmt> pack_b_runs(const OperandParts& B, int pb);
  // pack_b_runs's copy of one depth of a panel, run by run (kk, name prefix, the panel index
  // of a column, lets, zeroing and copies, *full, fixes, the bounds' depth, fix members, copy
  // members, member stride)
  using RunCopy = std::function<void(ExprRef, const std::string&, std::function<ExprRef(ExprRef)>, std::vector<Stmt>&,
                                     std::vector<Stmt>&, ExprRef*, std::vector<Stmt>*, ExprRef, int, int, int64_t)>;
  // its integer panels, a group of G k at a time (lower_matmul_pack_int8.cpp)
  Stmt pack_b_run_groups(const OperandParts& B, int pb, const std::optional<int64_t>& ca, const RunCopy& one_k);
  std::optional<Stmt> pack_b_taps(const OperandParts& B, int pb, int segs, const std::vector<int64_t>& cb, int64_t ca) const;
  // the side pack_taps packs: its panel buffer, panel index, block size and origin, panel width,
  // the rows' innermost dim
  struct TapSide {
    const char* buf;
    const char* panel;
    const char* count;
    const char* origin;
    int64_t width;
    int din;
  };
  std::optional<Stmt> pack_taps(const OperandParts& X, int param, int segs, const std::vector<int64_t>& cb, int64_t ca,
                                const TapSide& side) const;
  std::optional<Stmt> pack_a_taps(const OperandParts& Ax) const;  // f32 A through a window, tap by tap
  Stmt pack_b(const OperandParts& Bx);  // this job's B block into Bp (or a shared pack step's)
  Stmt pack_a(const OperandParts& Ax);  // this MC block of A into Ap (or a shared pack step's)
  // int8 groups over a stride-1 window's rows (lower_matmul_pack_int8.cpp)
  std::optional<Stmt> pack_a_contig(const OperandParts& Ax);

  // ---- micro-kernels (lower_matmul_micro.cpp) ----
  // f32: B's NR columns at depth kk from the panel, the prepacked panels, or B itself
  enum class BSrc { Panel, Prepacked, Shared, InPlace, RaggedPanel, Window };
  void plan_tile_sums(std::vector<Stmt>& allocs);  // tile_sums_, tbase_, the Ct scratch
  void zero_acc(int rows, std::vector<Stmt>& out) const;
  void store_tile(int rows, std::vector<Stmt>& out) const;
  void resume_sums(int rows, std::vector<Stmt>& out) const;
  void finish_tile(int rows, std::vector<Stmt>& out) const;
  std::vector<Stmt> int_kbody(int rows) const;
  std::vector<Stmt> f32_kbody(BSrc src, int rows, ExprRef ki = nullptr, int acc0 = 0, const std::string& sfx = "", int qn = 0) const;
  Stmt k_loop(std::vector<Stmt> body) const;
  std::vector<Stmt> f32_micro(int rows) const;
  std::vector<Stmt> f32_micro_cols(int qn) const;  // the ragged last NR panel: qn of NQ vectors
  std::vector<Stmt> f32_full_rows() const;         // MR rows: f32_micro, or an if with f32_micro_cols
  std::vector<Stmt> int_micro(int rows) const;
  std::vector<Stmt> micro_kernel();  // the accumulators and the kernel for a panel (ragged or not)
  Stmt prefetch_tile() const;        // the output tile's rows toward L1 before its k loop
  void prefetch_next_b(std::vector<Stmt>& micro);  // the next B panel, depth by depth (prefetch_b_, pfb)

  // ---- state: the kernel ----
  const KernelGraph& kg_;
  const Kernel& k_;
  const MatmulMatch& mm_;
  const MatmulParams& P_;
  const Shape& s_;
  LoopFunc f_;
  std::unordered_map<int, int> param_of_;
  std::map<int, ExprRef> batch_;  // batch dim -> its index in this job
  int tables_ = 0;
  NodeRef R_;                     // the contraction's reduce
  bool epilogue_ = false;         // the kernel's root is computed in the write-back
  int pout_ = -1, pa_ = -1, pb_ = -1;  // params: the output, A, B

  // sizes and blocks
  int64_t kc_blk_ = 0, mc_blk_ = 0, nc_blk_ = 0, msplit_ = 1;
  // integer contractions (u8/i8 operands, i32 sums): panels hold groups of G consecutive k
  // per row/column (G = 1 for floats), as elements of adt_ / bdt_ (the Dot's operands)
  int G_ = 1;
  DType adt_ = DType::F32, bdt_ = DType::F32, acc_ = DType::F32;
  SymInt Ms_, Ns_, Ks_, nbatch_;
  ExprRef M_, N_, K_;
  int NQ_ = 1;       // vectors in a tile row (NR / lanes)
  int threads_ = 1;
  // Tiles that are always whole (see setup)
  bool rows_whole_ = false, cols_whole_ = false;

  // where each operand comes from (see run)
  bool prepacked_ = false, prepacked_a_ = false, shared_a_ = false, shared_b_ = false, direct_ = false;
  bool direct_a_ = false;  // A read in place (reads_a_in_place): no Ap, broadcasts from A
  int pbp_ = -1, pap_ = -1;  // params of the prepacked panels
  std::optional<WindowInPlace> win_;  // a window whose interior panels are read in place or copied whole
  OperandParts A_, B_;                // this job's operand parts
  Affine caff_;                       // the output: row-major over the reduce's shape
  Part crow_, ccol_;

  // index names of the nest, and the int8 ragged K group
  ExprRef kk_, n0_, nc_, k0_, kc_, m0_, mc_;
  bool k_ragged_ = false;
  ExprRef kpack_, kin_;

  // micro-kernel and write-back
  ExprRef last_pc_;
  bool narrow_ = false, tile_sums_ = false, prefetch_b_ = false;
  ExprRef tbase_;           // tile sums: this tile's place in Ct
  ExprRef bbase_, abase_;   // f32: the panels' element at depth kk
  ExprRef a_entry_, b_entry_;  // a prepacked side packed per batch entry: this job's entry's offset (else null)
  ExprRef packed_entry(const OperandAccess& x, const Shape& packed) const;
  ExprRef pfbase_;          // f32: the next panel's line to prefetch at depth kk (bbase_ when not spread)
  int pf_spread_ = 1;       // MR panels a B panel feeds, over which its successor's prefetches are spread
  int pf_lines_ = 1;        // prefetches a depth (the lines of its row, where no spread covers them)
  ExprRef pf_line_;         // plain matmul, spread: the next panel's 64-byte line at depth kk
  int ragged_rows_ = 0;     // rows of the ragged A panel's kernel (0: none)
  int ragged_cols_q_ = 0;   // vectors of the ragged last B panel's kernel (0: none; f32_micro_cols)
  int cols_only_ = 0;       // a ragged B panel: 0 both kernels under an if, 1 its kernel only, 2 the whole panel's only
  int64_t kblocks_ = 0;     // narrow: K blocks
  int variants_ = 0;        // write-back variants built (their lets' names)
};

}  // namespace lathe::loop::matmul_lowering
