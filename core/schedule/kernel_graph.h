// kernel_graph.h — the kernel graph: a tensor graph grouped into fused kernels over buffers.
//
// schedule_graph() decides which nodes are *materialized* (get a buffer): graph inputs,
// tensor constants, outputs, Copy/Assign/Extern results, matmul-like reductions and their
// operands, views that cannot be read as index math of the consumer's loop nest, and
// reductions that more than one kernel would otherwise recompute. Every other node is
// *inlined*: recomputed inside each kernel that needs it (elementwise chains fuse; a
// reduction is fused into its consumer and computed once per row of the loop nest, so
// softmax and layernorm become one kernel). Each materialized non-source node is computed
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

// A Reduce add over Mul(View(A), View(B)) where the views broadcast A along one output dim
// (n) and B along another (m): a (batched) matmul, lowered to a packed micro-kernel.
struct MatmulMatch {
  NodeRef a = nullptr, b = nullptr;       // the tensors the views read
  const ViewSpec* a_view = nullptr;       // view of a in the Mul's shape
  const ViewSpec* b_view = nullptr;
  int m_axis = -1, n_axis = -1, k_axis = -1;
  std::vector<int> batch_axes;            // dims where both A and B vary
};
std::optional<MatmulMatch> match_matmul(NodeRef reduce);

}  // namespace lathe
