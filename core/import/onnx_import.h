// onnx_import.h — loading ONNX models (opsets 7–17) into Lathe graphs.
//
// load_onnx() turns a ModelProto into a Graph:
//   * graph inputs keep their names, dtypes and shapes; dim_param dims become symbolic
//     dims of that name, dims with neither value nor name become symbols "<input>_dI";
//   * initializers become Const tensor literals, or (weights_as_inputs) graph inputs
//     listed after the model's own inputs (integer initializers stay constants, since
//     shape-computing ops need their values at import time);
//   * every ONNX node becomes the matching frontend composite under a ProvenanceScope
//     "NODE_NAME:OpType" ("OpType#i" when the node is unnamed), so views can group it;
//   * shape-computing inputs (Reshape's shape, Slice starts, Pad pads, …) are folded to
//     constants at import time; a non-constant one is a user error.
//
// Errors are UserErrors naming the file and the node. An operator, dtype, attribute value
// or construct Lathe does not support throws OnnxUnsupported (a UserError), which the
// conformance runner reports as SKIP rather than FAIL. Hostile files (truncated, sizes
// that disagree with data, huge shapes, cycles, undefined inputs) are user errors too;
// no tensor larger than OnnxOptions::max_elements is ever allocated.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/ir/diag.h"
#include "core/ir/graph.h"
#include "core/runtime/host_tensor.h"

namespace lathe {

struct OnnxOptions {
  bool weights_as_inputs = false;         // float initializers become graph inputs
  int64_t max_elements = int64_t(1) << 31;  // cap on any one tensor's element count
  // Graph inputs given a value at import time: they become constants (and leave the
  // graph's inputs), so shape-computing ops can read them. This is shape specialization,
  // e.g. a Reshape whose target shape arrives as an input.
  std::map<std::string, HostTensor> fixed_inputs;
  // Sequence and optional graph inputs. A sequence's length and its elements' shapes, and
  // whether an optional holds a value, are structure that Lathe fixes at import time, as it
  // fixes a tensor input's rank. sequence_inputs[NAME] lists the element shapes of sequence
  // input NAME, whose elements become the tensor inputs "NAME[0]" … "NAME[n-1]" (the
  // declared element dtype). absent_optionals names the optional inputs that hold nothing;
  // a present optional input is its element (a tensor input NAME, or a sequence as above).
  // A sequence graph output NAME of n elements becomes the outputs "NAME[0]" … "NAME[n-1]".
  std::map<std::string, std::vector<std::vector<int64_t>>> sequence_inputs;
  std::set<std::string> absent_optionals;
  // Apply the `qdq` rule set after import (QDQ models run as int8 contractions); false, or
  // LATHE_QDQ=unfused, keeps QuantizeLinear / DequantizeLinear as plain ops (`lathe rewrite`).
  bool qdq_rules = true;
  // Then `qdq-sat16` (u8 × i8 pair sums saturating at i16, as ONNX Runtime's AVX2 kernels):
  // -1 = qdq_sat16_default() (LATHE_QDQ_SAT16, else on x86 without VNNI), 0 = exact sums, 1 = on.
  int qdq_sat16 = -1;
};

// The kind of a graph input or output, as the model declares it.
enum class OnnxValueKind { Tensor, Sequence, Optional };
struct OnnxSignature {
  std::vector<std::pair<std::string, OnnxValueKind>> inputs;  // without initializers, in order
  std::vector<std::pair<std::string, OnnxValueKind>> outputs;
};
OnnxSignature onnx_signature(const std::string& path);

// A backend-test value file (input_I.pb / output_I.pb) read as the kind the model declares:
// a TensorProto, a SequenceProto of tensors, or an OptionalProto (nothing, a tensor or a
// sequence of tensors).
struct OnnxValue {
  bool none = false;                 // an optional that holds nothing
  bool sequence = false;             // elements are a sequence's (else one tensor)
  std::vector<HostTensor> elements;
};
OnnxValue read_onnx_value(const std::string& path, OnnxValueKind kind, const OnnxOptions& opt = {});

// Something valid ONNX that Lathe does not implement (an op, a dtype, an attribute value,
// a dynamic shape input). The runner prints these as SKIP.
class OnnxUnsupported : public UserError {
 public:
  using UserError::UserError;
};

Graph load_onnx(const std::string& path, const OnnxOptions& opt = {});
// The same from bytes in memory (fuzzing, embedding); `name` is used in messages.
Graph load_onnx_bytes(const void* data, size_t size, const OnnxOptions& opt = {}, const std::string& name = "<memory>");

// The model's graph input names in order, without the initializers that old opsets also
// list as inputs: the order in which backend-test input_I.pb files bind.
std::vector<std::string> onnx_graph_inputs(const std::string& path);

// Registers load_onnx for ".onnx" with load_graph() (core/ir/loader.h). Call once at
// start-up (the lathe app does); idempotent. Explicit rather than a static initializer,
// which the linker would drop from a static library.
void register_onnx_loader();

// Reads a serialized TensorProto file (the backend-test input_I.pb / output_I.pb).
HostTensor read_onnx_tensor(const std::string& path, const OnnxOptions& opt = {});

}  // namespace lathe
