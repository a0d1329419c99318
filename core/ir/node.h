// node.h — nodes of the tensor graph: immutable, hash-consed, with stable ids.
//
// Every node is created through make_node(), which interns it in the process-wide
// NodeStore: two requests for the same (op, dtype, shape, inputs, attrs) return the same
// pointer. So "did this rewrite change anything?" is a pointer comparison, graphs share
// structure, and history snapshots cost nothing. Provenance (where a node came from) is
// deliberately NOT part of the identity: the first creator's provenance is kept.
//
// Nodes are never freed while the process runs (a session's history needs them). Ids are
// assigned in creation order and never reused.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/ir/dtype.h"
#include "core/ir/ops.h"
#include "core/ir/symbolic.h"
#include "core/ir/view.h"

namespace lathe {

class HostTensor;

// Where a node came from.
struct Provenance {
  std::string path;   // composite call path, e.g. "block0/attention/softmax"; "" = user
  int step = -1;      // rewrite step that created it; -1 = original graph
  bool backward = false;  // created by autodiff
};

// Per-op attributes. Only the fields an op uses are meaningful (see ops.def); the others
// keep their defaults so hashing and equality stay simple.
struct Attrs {
  // Const scalar: the value. For float dtypes `f` is authoritative, for integer and bool
  // dtypes `i` is (so i64 constants are exact). make_const() keeps both consistent.
  double f = 0;
  int64_t i = 0;
  std::shared_ptr<const HostTensor> data;  // Const tensor literal (shape = node shape)
  std::string name;            // Input: graph input name; Extern: kernel name
  int axis = 0;                // Index, Take
  ReduceOp reduce = ReduceOp::Add;  // Reduce
  std::vector<int> axes;       // Reduce (sorted, unique)
  std::shared_ptr<const ViewSpec> view;  // View
  std::vector<int64_t> ints;   // Extern: integer parameters (e.g. sgemm m, n, k, transposes)

  size_t hash() const;
  friend bool operator==(const Attrs& a, const Attrs& b);
};

struct Node;
using NodeRef = const Node*;

struct Node {
  uint32_t id;
  Op op;
  DType dtype;
  Shape shape;
  std::vector<NodeRef> inputs;
  Attrs attrs;
  Provenance prov;
  size_t hash;

  const OpInfo& info() const { return op_info(op); }
  size_t rank() const { return shape.size(); }
  // Const scalar helpers (false / 0 for other nodes).
  bool is_scalar_const() const { return op == Op::Const && !attrs.data; }
  double const_value() const;  // as double, whatever the dtype
};

// Creates or finds a node. Performs no validation (the builders in build.h do); use those
// unless you are a parser or a rewrite engine that validates separately.
NodeRef make_node(Op op, DType dtype, Shape shape, std::vector<NodeRef> inputs, Attrs attrs = {},
                  const Provenance& prov = {});

// Number of nodes ever created (for stats and benchmarks).
size_t node_store_size();
// Looks up a node by id; nullptr if unknown.
NodeRef node_by_id(uint32_t id);

// The provenance that make_node() gives new nodes: composites push their name on entry
// (ProvenanceScope), rewrite sessions set the step, autodiff sets backward.
struct ProvenanceContext {
  std::vector<std::string> stack;
  int step = -1;
  bool backward = false;
  std::string path() const;
};
ProvenanceContext& current_provenance();   // thread-local

// RAII: `ProvenanceScope s("softmax");` while building a composite.
class ProvenanceScope {
 public:
  explicit ProvenanceScope(std::string name);
  ~ProvenanceScope();
  ProvenanceScope(const ProvenanceScope&) = delete;
  ProvenanceScope& operator=(const ProvenanceScope&) = delete;
};

}  // namespace lathe
