// build.cpp — operand checks, type/shape inference, and the builders.
#include "core/ir/build.h"

#include <algorithm>

#include "core/ir/attention_op.h"
#include "core/ir/diag.h"
#include "core/ir/rnn_op.h"

namespace lathe::prim {

namespace {

std::string desc(NodeRef n) {
  return "%" + std::to_string(n->id) + " (" + std::string(op_name(n->op)) + " " + std::string(dtype_name(n->dtype)) +
         shape_to_string(n->shape) + ")";
}

// Can a view with these bounds read outside its input? Only decidable for constants.
std::string check_view_bounds(const ViewSpec& v, const Shape& in_shape) {
  if (v.shape.size() != v.strides.size()) return "view has " + std::to_string(v.shape.size()) + " dims but " +
                                                 std::to_string(v.strides.size()) + " strides";
  if (v.has_mask() && v.mask.size() != v.shape.size()) return "view mask must have one range per dim";
  SymInt in_numel = shape_numel(in_shape);
  if (!shape_is_const(v.shape) || !in_numel.is_const() || !v.offset.is_const()) return "";
  for (auto& s : v.strides) if (!s.is_const()) return "";
  for (auto& m : v.mask) if (!m.first.is_const() || !m.second.is_const()) return "";
  int64_t lo = v.offset.value(), hi = v.offset.value();
  for (size_t d = 0; d < v.shape.size(); ++d) {
    int64_t a = 0, b = v.shape[d].value();
    if (v.has_mask()) { a = std::max(a, v.mask[d].first.value()); b = std::min(b, v.mask[d].second.value()); }
    if (a >= b) return "";  // nothing is read
    int64_t s = v.strides[d].value();
    int64_t x = s * a, y = s * (b - 1);
    lo += std::min(x, y);
    hi += std::max(x, y);
  }
  if (lo < 0 || hi >= in_numel.value())
    return "view reads elements [" + std::to_string(lo) + ", " + std::to_string(hi) + "] outside its input of " +
           std::to_string(in_numel.value()) + " elements";
  return "";
}

bool dtype_ok_for(Op op, DType dt) {
  switch (op) {
    case Op::Recip: case Op::Sin: case Op::Exp2: case Op::Log2: case Op::Sqrt: return is_float(dt);
    case Op::IDiv: return is_int(dt);
    case Op::And: case Op::Or: case Op::Xor: case Op::Not: return !is_float(dt);
    case Op::Neg: return dt != DType::Bool;
    default: return true;
  }
}

}  // namespace

bool extern_known(const std::string& name) {
  return name == "sgemm" || name == "attention" || name == "attention_bwd" || name == "gemv_q4" || name == "rnn";
}

std::string check_node(Op op, DType dt, const Shape& shape, const std::vector<NodeRef>& in, const Attrs& a) {
  const OpInfo& info = op_info(op);
  std::string name(info.name);
  if (info.arity >= 0 && static_cast<int>(in.size()) != info.arity)
    return name + " expects " + std::to_string(info.arity) + " input(s), got " + std::to_string(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i]) return name + ": input " + std::to_string(i) + " is missing";
  for (auto& d : shape)
    if (d.is_const() && d.value() < 0) return name + ": negative dimension in shape " + shape_to_string(shape);
  auto same_shape = [&](NodeRef x, const char* what) -> std::string {
    if (x->shape == shape) return "";
    return name + ": " + what + " " + desc(x) + " has shape " + shape_to_string(x->shape) + ", expected " +
           shape_to_string(shape) + " (primitive ops do not broadcast; expand with a View first)";
  };
  switch (info.category) {
    case OpCategory::Source:
      if (op == Op::Input && a.name.empty()) return "Input needs a name";
      if (op == Op::Index) {
        if (!is_int(dt) && !is_float(dt)) return "Index must have a numeric dtype, got " + std::string(dtype_name(dt));
        if (a.axis < 0 || a.axis >= static_cast<int>(shape.size()))
          return "Index axis " + std::to_string(a.axis) + " is out of range for shape " + shape_to_string(shape);
      }
      if (op == Op::Const && a.data) {
        if (a.data->dtype() != dt) return "Const data dtype " + std::string(dtype_name(a.data->dtype())) +
                                          " differs from node dtype " + std::string(dtype_name(dt));
        if (!shape_is_const(shape) || shape_values(shape) != a.data->shape())
          return "Const data shape " + a.data->shape_string() + " differs from node shape " + shape_to_string(shape);
      }
      return "";
    case OpCategory::Movement:
      if (op == Op::View) {
        if (!a.view) return "View needs a view spec";
        if (in[0]->dtype != dt) return "View must keep its input's dtype " + std::string(dtype_name(in[0]->dtype));
        if (!(a.view->shape == shape)) return "View shape " + shape_to_string(shape) + " differs from its spec's " +
                                              shape_to_string(a.view->shape);
        std::string e = check_view_bounds(*a.view, in[0]->shape);
        return e.empty() ? "" : "View: " + e;
      }
      // Take
      if (!is_int(in[1]->dtype)) return "Take: index " + desc(in[1]) + " must be an integer tensor";
      if (in[0]->dtype != dt) return "Take must keep its input's dtype";
      if (in[0]->rank() != in[1]->rank())
        return "Take: index rank " + std::to_string(in[1]->rank()) + " differs from data rank " +
               std::to_string(in[0]->rank());
      if (a.axis < 0 || a.axis >= static_cast<int>(in[0]->rank())) return "Take: axis " + std::to_string(a.axis) + " out of range";
      if (!(in[1]->shape == shape)) return "Take: result shape must equal the index shape " + shape_to_string(in[1]->shape);
      for (size_t d = 0; d < shape.size(); ++d)
        if (static_cast<int>(d) != a.axis && in[0]->shape[d] != shape[d])
          return "Take: dim " + std::to_string(d) + " of index (" + shape[d].to_string() + ") and data (" +
                 in[0]->shape[d].to_string() + ") must match outside the gather axis";
      return "";
    case OpCategory::Memory:
      if (op == Op::Copy) {
        if (in[0]->dtype != dt) return "Copy must keep its input's dtype";
        return same_shape(in[0], "input");
      }
      if (in[0]->op != Op::Input) return "Assign target " + desc(in[0]) + " must be a graph Input";
      if (in[0]->dtype != in[1]->dtype || in[1]->dtype != dt) return "Assign: target and value dtypes must match";
      if (in[0]->shape != in[1]->shape) return "Assign: value shape " + shape_to_string(in[1]->shape) +
                                               " differs from target shape " + shape_to_string(in[0]->shape);
      return same_shape(in[1], "value");
    case OpCategory::Unary:
      if (op == Op::Cast) return same_shape(in[0], "input");
      if (in[0]->dtype != dt) return name + ": result dtype must equal the input's";
      if (!dtype_ok_for(op, dt)) return name + " does not accept dtype " + std::string(dtype_name(dt));
      return same_shape(in[0], "input");
    case OpCategory::Binary: {
      if (in[0]->dtype != in[1]->dtype)
        return name + ": operand dtypes differ: " + std::string(dtype_name(in[0]->dtype)) + " vs " +
               std::string(dtype_name(in[1]->dtype)) + " (insert a Cast)";
      bool cmp = op == Op::CmpLT || op == Op::CmpNE;
      if (cmp ? dt != DType::Bool : dt != in[0]->dtype)
        return name + ": result dtype must be " + std::string(cmp ? "bool" : dtype_name(in[0]->dtype));
      if (!dtype_ok_for(op, in[0]->dtype)) return name + " does not accept dtype " + std::string(dtype_name(in[0]->dtype));
      if (auto e = same_shape(in[0], "operand a"); !e.empty()) return e;
      return same_shape(in[1], "operand b");
    }
    case OpCategory::Ternary:
      if (in[0]->dtype != DType::Bool) return "Where: condition " + desc(in[0]) + " must be bool";
      if (in[1]->dtype != in[2]->dtype || in[1]->dtype != dt) return "Where: branch dtypes must match the result";
      for (int i = 0; i < 3; ++i)
        if (auto e = same_shape(in[i], "operand"); !e.empty()) return e;
      return "";
    case OpCategory::Reduce: {
      if (in[0]->dtype != dt) return "Reduce must keep its input's dtype";
      if (shape.size() != in[0]->rank()) return "Reduce keeps the rank (reduced axes have size 1)";
      for (size_t i = 0; i < a.axes.size(); ++i) {
        int ax = a.axes[i];
        if (ax < 0 || ax >= static_cast<int>(shape.size())) return "Reduce: axis " + std::to_string(ax) + " out of range";
        if (i && a.axes[i - 1] >= ax) return "Reduce: axes must be sorted and unique";
      }
      for (size_t d = 0; d < shape.size(); ++d) {
        bool red = std::find(a.axes.begin(), a.axes.end(), static_cast<int>(d)) != a.axes.end();
        SymInt want = red ? SymInt(1) : in[0]->shape[d];
        if (shape[d] != want) return "Reduce: result dim " + std::to_string(d) + " must be " + want.to_string();
      }
      return "";
    }
    case OpCategory::Extern:
      if (!extern_known(a.name)) return "Extern: unknown library kernel '" + a.name + "' (known: sgemm, attention, attention_bwd, gemv_q4, rnn)";
      if (a.name == "rnn") return check_rnn(in, dt, shape, a.ints);  // core/ir/rnn_op.h
      if (a.name == "attention") return check_attention(in, dt, shape, a.ints);
      if (a.name == "attention_bwd") return check_attention_bwd(in, dt, shape, a.ints);
      if (a.name == "gemv_q4") {  // packed int4 weights, see backends/library.h
        if (in.size() != 3 || a.ints.size() != 4) return "Extern gemv_q4 takes (X, packed W, scales) and ints {M, N, K, block}";
        int64_t M = a.ints[0], N = a.ints[1], K = a.ints[2], B = a.ints[3];
        if (M < 1 || N < 1 || B < 2 || B % 2 != 0 || K % B != 0)
          return "Extern gemv_q4: the block must be even and divide K (M=" + std::to_string(M) + ", N=" + std::to_string(N) +
                 ", K=" + std::to_string(K) + ", block=" + std::to_string(B) + ")";
        if (dt != DType::F32 || in[0]->dtype != DType::F32 || in[1]->dtype != DType::U8 || in[2]->dtype != DType::F32)
          return "Extern gemv_q4 takes X f32, W u8 (two 4-bit values a byte), scales f32";
        if (shape.size() != 2 || shape[0] != SymInt(M) || shape[1] != SymInt(N)) return "Extern gemv_q4: result shape must be [M, N]";
        if (shape_numel(in[0]->shape) != SymInt(M * K) || shape_numel(in[1]->shape) != SymInt(N * K / 2) ||
            shape_numel(in[2]->shape) != SymInt(N * (K / B)))
          return "Extern gemv_q4: operand sizes do not match M*K, N*K/2 and N*K/block";
        return "";
      }
      if (a.name == "sgemm") {
        if (in.size() != 2 || a.ints.size() != 5) return "Extern sgemm takes (A, B) and ints {M, N, K, transA, transB}";
        if (dt != DType::F32 || in[0]->dtype != DType::F32 || in[1]->dtype != DType::F32) return "Extern sgemm is f32 only";
        if (shape.size() != 2 || shape[0] != SymInt(a.ints[0]) || shape[1] != SymInt(a.ints[1]))
          return "Extern sgemm: result shape must be [M, N]";
        if (shape_numel(in[0]->shape) != SymInt(a.ints[0] * a.ints[2]) ||
            shape_numel(in[1]->shape) != SymInt(a.ints[2] * a.ints[1]))
          return "Extern sgemm: operand sizes do not match M, N, K";
      }
      return "";
  }
  return "";
}

TypeShape infer(Op op, const std::vector<NodeRef>& in, const Attrs& a, DType hint) {
  switch (op) {
    case Op::View: return {in.at(0)->dtype, a.view ? a.view->shape : in.at(0)->shape};
    case Op::Take: return {in.at(0)->dtype, in.at(1)->shape};
    case Op::Copy: return {in.at(0)->dtype, in.at(0)->shape};
    case Op::Assign: return {in.at(1)->dtype, in.at(1)->shape};
    case Op::Cast: return {hint, in.at(0)->shape};
    case Op::CmpLT: case Op::CmpNE: return {DType::Bool, in.at(0)->shape};
    case Op::Where: return {in.at(1)->dtype, in.at(1)->shape};
    case Op::Reduce: {
      Shape s = in.at(0)->shape;
      for (int ax : a.axes) if (ax >= 0 && ax < static_cast<int>(s.size())) s[ax] = 1;
      return {in.at(0)->dtype, s};
    }
    default:
      if (!in.empty()) return {in[0]->dtype, in[0]->shape};
      return {hint, {}};
  }
}

NodeRef build(Op op, DType dt, Shape shape, std::vector<NodeRef> inputs, Attrs attrs) {
  std::string err = check_node(op, dt, shape, inputs, attrs);
  if (!err.empty()) throw UserError(err);
  return make_node(op, dt, std::move(shape), std::move(inputs), std::move(attrs));
}

NodeRef input(const std::string& name, DType dt, Shape shape) {
  Attrs a;
  a.name = name;
  return build(Op::Input, dt, std::move(shape), {}, std::move(a));
}

NodeRef constant(double value, DType dt, Shape shape) {
  Attrs a;
  if (is_float(dt)) {
    // store the value as the dtype would hold it, so equal constants intern together
    HostTensor t(dt, {1});
    t.set_f64(0, value);
    a.f = t.get_f64(0);
    a.i = 0;
  } else {
    HostTensor t(dt, {1});
    t.set_f64(0, value);
    a.i = t.get_i64(0);
    a.f = static_cast<double>(a.i);
  }
  return build(Op::Const, dt, std::move(shape), {}, std::move(a));
}

NodeRef constant_int(int64_t value, DType dt, Shape shape) {
  if (is_float(dt)) return constant(static_cast<double>(value), dt, std::move(shape));
  Attrs a;
  a.i = wrap_int(value, dt);
  a.f = static_cast<double>(a.i);
  return build(Op::Const, dt, std::move(shape), {}, std::move(a));
}

NodeRef constant_tensor(const HostTensor& t) {
  Attrs a;
  a.data = std::make_shared<HostTensor>(t);
  return build(Op::Const, t.dtype(), shape_from(t.shape()), {}, std::move(a));
}

NodeRef index(DType dt, Shape shape, int axis) {
  Attrs a;
  a.axis = axis;
  return build(Op::Index, dt, std::move(shape), {}, std::move(a));
}

NodeRef view(NodeRef x, const ViewSpec& v) {
  if (v.is_contiguous_of(x->shape)) return x;
  ViewSpec spec = v;
  NodeRef src = x;
  if (x->op == Op::View) {
    if (auto c = view_compose(*x->attrs.view, v)) {
      spec = *c;
      src = x->inputs[0];
      if (spec.is_contiguous_of(src->shape)) return src;
    }
  }
  Attrs a;
  a.view = std::make_shared<ViewSpec>(spec);
  return build(Op::View, src->dtype, spec.shape, {src}, std::move(a));
}

NodeRef take(NodeRef x, NodeRef idx, int axis) {
  Attrs a;
  a.axis = axis;
  return build(Op::Take, x->dtype, idx->shape, {x, idx}, std::move(a));
}

NodeRef copy(NodeRef x) { return build(Op::Copy, x->dtype, x->shape, {x}, {}); }

NodeRef assign(NodeRef target, NodeRef value) { return build(Op::Assign, value->dtype, value->shape, {target, value}, {}); }

NodeRef unary(Op op, NodeRef x) {
  LATHE_CHECK(op_info(op).category == OpCategory::Unary && op != Op::Cast, "prim::unary needs a unary op; use cast()");
  return build(op, x->dtype, x->shape, {x}, {});
}

NodeRef cast(NodeRef x, DType dt) {
  if (x->dtype == dt) return x;
  return build(Op::Cast, dt, x->shape, {x}, {});
}

NodeRef binary(Op op, NodeRef a, NodeRef b) {
  LATHE_CHECK(op_info(op).category == OpCategory::Binary, "prim::binary needs a binary op");
  DType dt = (op == Op::CmpLT || op == Op::CmpNE) ? DType::Bool : a->dtype;
  return build(op, dt, a->shape, {a, b}, {});
}

NodeRef where(NodeRef c, NodeRef a, NodeRef b) { return build(Op::Where, a->dtype, a->shape, {c, a, b}, {}); }

NodeRef reduce(ReduceOp r, NodeRef x, std::vector<int> axes) {
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty()) return x;
  Attrs a;
  a.reduce = r;
  a.axes = axes;
  auto ts = infer(Op::Reduce, {x}, a);
  return build(Op::Reduce, x->dtype, ts.shape, {x}, std::move(a));
}

NodeRef extern_call(const std::string& name, std::vector<NodeRef> inputs, DType dt, Shape shape, std::vector<int64_t> ints) {
  Attrs a;
  a.name = name;
  a.ints = std::move(ints);
  return build(Op::Extern, dt, std::move(shape), std::move(inputs), std::move(a));
}

}  // namespace lathe::prim
