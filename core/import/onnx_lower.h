// onnx_lower.h — internal to core/import: what an operator lowering sees (NodeCtx) and
// the operator table, filled by one file per family (lower_*.cpp).
//
// A lowering reads its inputs (frontend Tensors; optional inputs may be absent), its
// attributes (typed accessors that reject wrong field types and apply defaults), folds
// shape-computing inputs to constants with const_in(), and sets one Tensor per output.
// It throws through fail() (a malformed model) or unsupported() (valid ONNX that Lathe
// does not implement); both name the node.
#pragma once
#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/frontend/tensor.h"
#include "core/import/onnx_import.h"

namespace lathe::onnx_import {

// Import-time constant folding: the value of a node whose inputs are all constants.
// Throws OnnxUnsupported ("dynamic shape input not supported: WHERE") when n depends on a
// graph input. Results are cached per node.
class NodeCtx;
class Folder {
 public:
  explicit Folder(int64_t max_elements) : max_elements_(max_elements) {}
  std::optional<HostTensor> try_fold(NodeRef n);
  int64_t max_elements() const { return max_elements_; }

  // Resize outputs (by node) that resample only the spatial axes (dims 2…) with taps whose
  // weights sum to 1 (nearest, linear; no tf_crop_and_resize extrapolation): the resized
  // input, and how to apply the same resampling to another tensor of that spatial shape.
  // A 1×1 convolution of such an output is computed before the resampling (conv_op).
  struct Resampling {
    Tensor input;
    std::function<Tensor(const NodeCtx&, const Tensor&)> apply;
  };
  std::map<NodeRef, Resampling> resamplings;

 private:
  int64_t max_elements_;
  std::map<NodeRef, std::optional<HostTensor>> cache_;
};

// A value passed into or out of a control-flow body: a tensor, a sequence (an import-time
// list of tensors) or an empty optional (None).
struct BodyValue {
  enum class Kind { Tensor, Sequence, None } kind = Kind::Tensor;
  std::optional<Tensor> tensor;
  std::vector<Tensor> seq;
  static BodyValue of(const Tensor& t) { return BodyValue{Kind::Tensor, t, {}}; }
  static BodyValue of_seq(std::vector<Tensor> s) { return BodyValue{Kind::Sequence, std::nullopt, std::move(s)}; }
  static BodyValue none() { return BodyValue{Kind::None, std::nullopt, {}}; }
};

class NodeCtx {
 public:
  NodeCtx(const onnx::NodeProto& proto, int opset, std::vector<NodeRef> inputs, Folder& folder, std::string where)
      : proto_(proto), opset_(opset), inputs_(std::move(inputs)), folder_(folder), where_(std::move(where)) {
    outputs_.resize(proto_.output_size());
    seq_out_.resize(proto_.output_size());
    none_out_.resize(proto_.output_size());
  }

  const onnx::NodeProto& proto() const { return proto_; }
  const std::string& op_type() const { return proto_.op_type(); }
  int opset() const { return opset_; }
  const std::string& where() const { return where_; }  // "node 'conv1' (Conv)"
  int64_t max_elements() const { return folder_.max_elements(); }
  Folder& folder() const { return folder_; }

  // ---- inputs ----
  size_t num_inputs() const { return inputs_.size(); }
  bool has(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  Tensor in(size_t i) const;                      // required input (fail() when absent)
  std::optional<Tensor> opt_in(size_t i) const;   // optional input
  std::vector<Tensor> all_inputs() const;         // every present input (variadic ops)
  // A shape-computing input folded to its value (OnnxUnsupported when not constant).
  HostTensor const_in(size_t i) const;
  std::vector<int64_t> ints_in(size_t i) const;   // integer 0-D/1-D constant input
  double scalar_in(size_t i) const;               // one-element constant input
  // Any tensor's value when it is computable at import time (no graph input reachable).
  std::optional<HostTensor> fold(const Tensor& t) const { return folder_.try_fold(t.node()); }
  // Input i's value for a check (indices in range): known at import time, or in a staged
  // run (onnx_staged.h) on the host for this run. Never to shape the program.
  std::optional<HostTensor> known_in(size_t i) const;
  using HostLookup = std::function<std::optional<HostTensor>(const std::string& name)>;
  void set_host_lookup(HostLookup f) { host_lookup_ = std::move(f); }

  // ---- attributes (wrong field types are user errors) ----
  bool has_attr(const std::string& name) const { return find_attr(name) != nullptr; }
  int64_t attr_int(const std::string& name, int64_t def) const;
  double attr_float(const std::string& name, double def) const;
  std::string attr_string(const std::string& name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const std::string& name, std::vector<float> def = {}) const;
  const onnx::TensorProto* attr_tensor(const std::string& name) const;
  const onnx::AttributeProto* find_attr(const std::string& name) const;

  // ---- outputs ----
  size_t num_outputs() const { return outputs_.size(); }
  bool wants(size_t i) const { return i < outputs_.size() && !proto_.output(static_cast<int>(i)).empty(); }
  void set(size_t i, const Tensor& t);
  const std::vector<NodeRef>& outputs() const { return outputs_; }

  // ---- helpers ----
  int axis(int64_t a, int rank, const char* what = "axis") const;  // normalized, checked
  [[noreturn]] void fail(const std::string& msg) const;
  [[noreturn]] void unsupported(const std::string& msg) const;
  // OnnxUnsupported when an optional output the lowering cannot produce is requested.
  void only_outputs(size_t n) const;

  // ---- sequences (import-time lists of tensors) ----
  void set_sequence_inputs(std::vector<const std::vector<NodeRef>*> s) { seq_in_ = std::move(s); }
  bool is_seq(size_t i) const { return i < seq_in_.size() && seq_in_[i] != nullptr; }
  std::vector<Tensor> seq_in(size_t i) const;  // fail() when input i is not a sequence
  void set_seq(size_t i, const std::vector<Tensor>& v);
  const std::optional<std::vector<NodeRef>>& seq_out(size_t i) const { return seq_out_[i]; }

  // ---- optionals: a present optional is its element (a tensor or a sequence); an empty
  // one (None) is an import-time marker, like an absent input but named ----
  bool is_none(size_t i) const {
    return i < inputs_.size() && !inputs_[i] && !is_seq(i) && !proto_.input(static_cast<int>(i)).empty();
  }
  void set_none(size_t i) { if (i < none_out_.size()) none_out_[i] = true; }
  bool none_out(size_t i) const { return none_out_[i]; }

  // ---- control flow ----
  // Lowers one instance of a body graph (attribute `attr`, a GRAPH) with its inputs bound
  // to args and the enclosing scope visible; returns its outputs in order.
  using SubgraphFn = std::function<std::vector<BodyValue>(const onnx::GraphProto&, const std::vector<BodyValue>&)>;
  void set_subgraph_runner(SubgraphFn f) { subgraph_ = std::move(f); }
  const onnx::GraphProto& attr_graph(const std::string& name) const;
  // tensors in and out (a sequence or None among the outputs is OnnxUnsupported)
  std::vector<Tensor> run_body(const std::string& attr, const std::vector<Tensor>& args) const;
  std::vector<BodyValue> run_body_values(const std::string& attr, const std::vector<BodyValue>& args) const;
  BodyValue value_in(size_t i) const;  // input i as whatever it is
  void set_value(size_t i, const BodyValue& v);

 private:
  const onnx::NodeProto& proto_;
  int opset_;
  std::vector<NodeRef> inputs_;
  Folder& folder_;
  std::string where_;
  std::vector<NodeRef> outputs_;
  SubgraphFn subgraph_;
  HostLookup host_lookup_;
  std::vector<const std::vector<NodeRef>*> seq_in_;
  std::vector<std::optional<std::vector<NodeRef>>> seq_out_;
  std::vector<bool> none_out_;
};

using LowerFn = std::function<void(NodeCtx&)>;
using OpTable = std::map<std::string, LowerFn>;

// The full table (built once); each family adds its operators.
const OpTable& op_table();
void add_elementwise_ops(OpTable& t);  // lower_elementwise.cpp
void add_activation_ops(OpTable& t);   // lower_activation.cpp
void add_reduce_ops(OpTable& t);       // lower_reduce.cpp
void add_shape_ops(OpTable& t);        // lower_shape.cpp
void add_index_ops(OpTable& t);        // lower_index.cpp
void add_nn_ops(OpTable& t);           // lower_nn.cpp (matmul, gemm, conv, pooling)
void add_norm_ops(OpTable& t);         // lower_norm.cpp (softmax, normalizations)
void add_misc_ops(OpTable& t);         // lower_misc.cpp (einsum, cumsum, topk, trilu)
void add_loss_ops(OpTable& t);         // lower_loss.cpp (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss)
void add_resize_ops(OpTable& t);       // lower_resize.cpp (Resize, Upsample)
void add_rnn_ops(OpTable& t);          // lower_rnn.cpp (RNN, GRU, LSTM)
void add_scatter_ops(OpTable& t);      // lower_scatter.cpp (ScatterElements, ScatterND, Scatter, GatherND, …)
void add_extra_ops(OpTable& t);        // lower_extra.cpp (EyeLike, LRN, windows, BitShift, …)
void add_signal_ops(OpTable& t);       // lower_signal.cpp (DFT, STFT, MelWeightMatrix)
void add_text_ops(OpTable& t);         // lower_text.cpp (TfIdfVectorizer)
void add_control_ops(OpTable& t);      // lower_control.cpp (If, Loop, Scan)
void add_sequence_ops(OpTable& t);     // lower_sequence.cpp (Sequence*, SplitToSequence, ConcatFromSequence)
void add_quant_ops(OpTable& t);        // lower_quant.cpp (QuantizeLinear, MatMulInteger, QLinearConv, …)

// lower_nn.cpp: Conv's attributes (pads, strides, dilations, group, auto_pad) over integer
// operands: Σ x·w in i32 with x padded by pad_value (ConvInteger, QLinearConv).
Tensor conv_integer(const NodeCtx& c, const Tensor& x, const Tensor& weight, int64_t pad_value);
// Shared helpers for lowerings.
Tensor multi_broadcast_fold(const std::vector<Tensor>& xs, const std::function<Tensor(const Tensor&, const Tensor&)>& f);
// The same dtype as `like`, erroring (not promoting) on a mismatch, as ONNX requires.
void require_same_dtype(const NodeCtx& c, const Tensor& a, const Tensor& b);

}  // namespace lathe::onnx_import
