// kernel_graph.h — the kernel graph: a tensor graph grouped into fused kernels over buffers.
//
// schedule_graph() decides which nodes are *materialized* (get a buffer): graph inputs,
// tensor constants, outputs, Copy/Assign/Extern results, matmul-like reductions and their
// operands, views that cannot be read as index math of the consumer's loop nest,
// reductions that more than one kernel would otherwise recompute, and values two or more
// kernels read in full where such values nest (a residual stream; schedule.cpp). Every other node is
// *inlined*: recomputed inside each kernel that needs it (elementwise chains fuse; a
// reduction is fused into its consumer and computed once per row of the loop nest, so
// softmax and layernorm become one kernel). A matmul-like reduction read by one kernel of
// elementwise work is fused into it as the matmul's epilogue (bias, GELU, residual).
// Each materialized non-source node is computed
// by exactly one kernel, which lists the primitive nodes it contains (provenance both
// ways: Kernel::nodes and KernelGraph::kernels_of).
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ir/graph.h"

namespace lathe {

enum class BufferKind : uint8_t { Input, Constant, Output, Intermediate };

struct BufferDesc {
  int id = -1;
  std::string name;          // input name, output name, or "t<node id>"
  DType dtype = DType::F32;
  Shape shape;               // row-major, contiguous
  BufferKind kind = BufferKind::Intermediate;
  NodeRef node = nullptr;    // the node whose value lives here
};

struct Kernel {
  int id = -1;
  std::string name;            // C identifier: "k0_softmax"
  std::string kind;            // "elementwise", "reduce", "matmul", "extern", "copy"
  NodeRef root = nullptr;      // the materialized node it computes
  int output = -1;             // buffer it writes
  std::vector<int> inputs;     // buffers it reads (sorted, unique)
  std::vector<NodeRef> nodes;  // primitive nodes computed inside, inputs before users, root last
  NodeRef matmul = nullptr;    // kind "matmul": the contraction (the root, or under an epilogue)
  // kind "matmul" whose B operand is a constant: a Constant buffer holding B pre-packed once,
  // when the program was built, in the CPU lowering's panel order for KC = packed_kc and
  // NR = packed_nr (core/loop/prepack.h); -1 when the kernel packs B itself on every run
  int packed_b = -1;
  int64_t packed_kc = 0, packed_nr = 0;
};

struct KernelGraph {
  Graph graph;
  std::vector<BufferDesc> buffers;
  std::vector<Kernel> kernels;                               // in execution order
  std::vector<std::pair<std::string, int>> outputs;          // output name -> buffer
  std::unordered_map<NodeRef, int> buffer_of;                // materialized node -> buffer
  std::unordered_map<NodeRef, std::vector<int>> kernels_of;  // node -> kernels containing it
  std::vector<std::string> symbols;                          // runtime dim names

  bool materialized(NodeRef n) const { return buffer_of.count(n) != 0; }
};

// Groups g's nodes into kernels. `force` names extra nodes to materialize (the lowering
// asks for this when a fused reduction would be recomputed; see build_program).
KernelGraph schedule_graph(const Graph& g, const std::set<NodeRef>& force = {});

// A contraction: Reduce add (f32) over Mul(P, Q) where P and Q are chains of Views of
// materialized tensors (sliding windows, padding masks, transposes, broadcasts). Every dim
// of the Mul is classified: reduced (K group), read by only one operand (M group: rows of
// the micro-kernel, N group: its vector columns), or read by both (batch). Each group may
// hold several dims (a convolution: M = K_out, N = (batch, OH, OW), K = (C, R, S)), and
// each operand is read as affine index math in the Mul's index plus range conditions
// (padding), so the packed matmul lowering gathers it in its packing step (implicit im2col).
struct Affine {                                  // c0 + Σ coef · idx[dim]  (over the Mul's dims)
  SymInt c0 = 0;
  std::vector<std::pair<int, SymInt>> terms;
  bool uses(int dim) const;
  std::optional<int64_t> const_coef(int dim) const;  // dim's coefficient (its terms summed), if constant
};
struct OperandAccess {
  NodeRef src = nullptr;                         // the materialized tensor read
  Affine addr;                                   // flat (row-major) element index into src
  struct Bound { Affine coord; SymInt lo, hi; };  // lo <= coord < hi, else the element reads 0
  std::vector<Bound> bounds;
  bool uses(int dim) const;
};
struct MatmulMatch {
  NodeRef reduce = nullptr, mul = nullptr;
  OperandAccess a, b;                            // a: the M (rows) side, b: the N (columns) side
  std::vector<int> m_axes, n_axes, k_axes, batch_axes;  // Mul dims of size != 1, outer first
  // qdq-sat16's form (core/rewrite/qdq_rules.h): Σ_j sat16(a_2j·b_2j + a_2j+1·b_2j+1) over
  // the pair axis, the last of k_axes (the others, a conv's taps, summed plainly), u8 × i8
  // (either side u8). `mul` is then a Mul of the full operands built for the match
  // (not a graph node), `reduce` the graph's Reduce over the K/2 pairs.
  bool sat16 = false;
};
std::optional<MatmulMatch> match_matmul(NodeRef reduce);
// The products an integer contraction (i32 Reduce add over u8/i8 products) sums: its Mul, or
// in qdq-sat16's form the Mul of the full operands its pairs split (built, not a graph node);
// nullptr for any other node. Its element count is the contraction's multiply-adds.
NodeRef int8_products(NodeRef reduce);
// How the Mul operand x (a chain of Views down to the tensor read) addresses that tensor, as
// match_matmul sees each operand (the depthwise lowering reads its operands the same way).
OperandAccess operand_access(NodeRef x);

// Can kernel root `root` be computed as an epilogue of the contraction `reduce` inside the
// matmul kernel (elementwise ops and squeeze/unsqueeze views between them, other inputs read
// from buffers, same non-1 dims, f32)? `mat` is the set of materialized nodes.
bool fusable_epilogue(NodeRef root, NodeRef reduce, const std::set<NodeRef>& mat);

}  // namespace lathe
