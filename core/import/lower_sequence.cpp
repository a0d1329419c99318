// lower_sequence.cpp — ONNX sequence ops: SequenceEmpty SequenceConstruct SequenceAt
// SequenceInsert SequenceErase SequenceLength SplitToSequence ConcatFromSequence
// SequenceMap, and the optional ops Optional OptionalHasElement OptionalGetElement.
//
// A sequence exists only at import time: a list of tensors the importer threads between
// nodes (NodeCtx::seq_in / set_seq). Positions must therefore be constants; a sequence
// graph input is one tensor input per element and a sequence graph output one output per
// element (OnnxOptions::sequence_inputs), so what reaches the graph is tensors. An optional
// is likewise structure: a present one is its element, an empty one (None) a marker that
// OptionalHasElement folds to false. SequenceMap lowers its body once per element.
#include "core/import/onnx_lower.h"
#include "core/import/onnx_tensor.h"

namespace lathe::onnx_import {
namespace {

// A position in [-n, n) (or [-n, n] when inserting), normalized.
int64_t position(const NodeCtx& c, size_t i, int64_t n, bool insert) {
  std::vector<int64_t> v = c.ints_in(i);
  if (v.size() != 1) c.fail("position must hold one value");
  int64_t p = v[0], hi = insert ? n : n - 1;
  if (p < -n || p > hi) c.fail("position " + std::to_string(p) + " is out of range for a sequence of " + std::to_string(n));
  return p < 0 ? p + n : p;
}

void seq_empty(NodeCtx& c) {
  c.only_outputs(1);
  if (c.has_attr("dtype")) require_dtype(static_cast<int>(c.attr_int("dtype", 1)), c.where() + " dtype");
  c.set_seq(0, {});
}

void seq_construct(NodeCtx& c) {
  c.only_outputs(1);
  std::vector<Tensor> xs = c.all_inputs();
  for (auto& x : xs) require_same_dtype(c, xs[0], x);
  c.set_seq(0, xs);
}

void seq_at(NodeCtx& c) {
  c.only_outputs(1);
  std::vector<Tensor> s = c.seq_in(0);
  c.set(0, s[static_cast<size_t>(position(c, 1, static_cast<int64_t>(s.size()), false))]);
}

void seq_insert(NodeCtx& c) {
  c.only_outputs(1);
  std::vector<Tensor> s = c.seq_in(0);
  Tensor x = c.in(1);
  if (!s.empty()) require_same_dtype(c, s[0], x);
  int64_t n = static_cast<int64_t>(s.size());
  int64_t p = c.has(2) ? position(c, 2, n, true) : n;
  s.insert(s.begin() + p, x);
  c.set_seq(0, s);
}

void seq_erase(NodeCtx& c) {
  c.only_outputs(1);
  std::vector<Tensor> s = c.seq_in(0);
  int64_t n = static_cast<int64_t>(s.size());
  if (n == 0) c.fail("erasing from an empty sequence");
  int64_t p = c.has(1) ? position(c, 1, n, false) : n - 1;
  s.erase(s.begin() + p);
  c.set_seq(0, s);
}

void seq_length(NodeCtx& c) {
  c.only_outputs(1);
  c.set(0, full({}, static_cast<int64_t>(c.seq_in(0).size()), DType::I64));
}

void split_to_seq(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  if (x.rank() == 0) c.fail("input must have rank >= 1");
  int ax = c.axis(c.attr_int("axis", 0), x.rank());
  if (!x.shape()[ax].is_const()) c.unsupported("dynamic shape input not supported: SplitToSequence along a symbolic dim");
  int64_t n = x.shape()[ax].value();
  std::vector<Tensor> parts;
  if (!c.has(1)) {  // one element per index; keepdims decides whether the axis stays
    bool keep = c.attr_int("keepdims", 1) != 0;
    for (int64_t i = 0; i < n; ++i) parts.push_back(keep ? narrow(x, ax, i, 1) : select(x, ax, i));
  } else {
    HostTensor sp = c.const_in(1);
    std::vector<int64_t> sizes;
    if (sp.rank() == 0) {
      int64_t k = sp.get_i64(0);
      if (k <= 0) c.fail("split must be positive");
      for (int64_t off = 0; off < n; off += k) sizes.push_back(std::min(k, n - off));
    } else {
      int64_t total = 0;
      for (int64_t i = 0; i < sp.numel(); ++i) {
        if (sp.get_i64(i) < 0) c.fail("split sizes must be non-negative");
        sizes.push_back(sp.get_i64(i));
        total += sizes.back();
      }
      if (total != n) c.fail("split sizes sum to " + std::to_string(total) + ", the axis has " + std::to_string(n));
    }
    int64_t off = 0;
    for (int64_t k : sizes) { parts.push_back(narrow(x, ax, off, k)); off += k; }
  }
  c.set_seq(0, parts);
}

void concat_from_seq(NodeCtx& c) {
  c.only_outputs(1);
  std::vector<Tensor> s = c.seq_in(0);
  if (s.empty()) c.unsupported("ConcatFromSequence of an empty sequence");
  bool new_axis = c.attr_int("new_axis", 0) != 0;
  if (!c.has_attr("axis")) c.fail("attribute 'axis' is required");
  int ax = c.axis(c.attr_int("axis", 0), s[0].rank() + (new_axis ? 1 : 0));
  c.set(0, new_axis ? stack(s, ax) : concat(s, ax));
}

void seq_map(NodeCtx& c) {
  std::vector<Tensor> first = c.seq_in(0);
  size_t n = first.size();
  for (size_t j = 1; j < c.num_inputs(); ++j)
    if (c.is_seq(j) && c.seq_in(j).size() != n)
      c.fail("input sequences have lengths " + std::to_string(n) + " and " + std::to_string(c.seq_in(j).size()));
  std::vector<std::vector<Tensor>> outs(c.num_outputs());
  for (size_t k = 0; k < n; ++k) {
    std::vector<Tensor> args;
    for (size_t j = 0; j < c.num_inputs(); ++j) args.push_back(c.is_seq(j) ? c.seq_in(j)[k] : c.in(j));
    std::vector<Tensor> r = c.run_body("body", args);
    if (r.size() != c.num_outputs())
      c.fail("the body returns " + std::to_string(r.size()) + " outputs for " + std::to_string(c.num_outputs()));
    for (size_t i = 0; i < r.size(); ++i) outs[i].push_back(r[i]);
  }
  for (size_t i = 0; i < outs.size(); ++i) c.set_seq(i, outs[i]);
}

void optional_op(NodeCtx& c) {
  c.only_outputs(1);
  if (c.is_seq(0)) c.set_seq(0, c.seq_in(0));
  else if (c.has(0)) c.set(0, c.in(0));
  else if (c.is_none(0)) c.fail("input 0 is itself an empty optional (optionals do not nest here)");
  else c.set_none(0);  // Optional(type=...) with no input: an empty optional
}

void optional_has_element(NodeCtx& c) {
  c.only_outputs(1);
  c.set(0, full({}, c.is_seq(0) || c.has(0) ? 1 : 0, DType::Bool));
}

void optional_get_element(NodeCtx& c) {
  c.only_outputs(1);
  if (c.is_seq(0)) c.set_seq(0, c.seq_in(0));
  else if (c.has(0)) c.set(0, c.in(0));
  else c.fail("the optional holds no value");
}

}  // namespace

void add_sequence_ops(OpTable& t) {
  t["SequenceMap"] = seq_map;
  t["Optional"] = optional_op;
  t["OptionalHasElement"] = optional_has_element;
  t["OptionalGetElement"] = optional_get_element;
  t["SequenceEmpty"] = seq_empty;
  t["SequenceConstruct"] = seq_construct;
  t["SequenceAt"] = seq_at;
  t["SequenceInsert"] = seq_insert;
  t["SequenceErase"] = seq_erase;
  t["SequenceLength"] = seq_length;
  t["SplitToSequence"] = split_to_seq;
  t["ConcatFromSequence"] = concat_from_seq;
}

}  // namespace lathe::onnx_import
