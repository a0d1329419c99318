// ops.cpp — op metadata tables generated from ops.def.
#include "core/ir/ops.h"

namespace lathe {

namespace {
constexpr OpInfo kOps[] = {
#define LATHE_OP(name, cat, arity, doc) {#name, OpCategory::cat, arity, doc},
#include "core/ir/ops.def"
#undef LATHE_OP
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kNumOps);
}  // namespace

const OpInfo& op_info(Op op) { return kOps[static_cast<int>(op)]; }

std::optional<Op> op_from_name(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (kOps[i].name == name) return static_cast<Op>(i);
  return std::nullopt;
}

std::string_view category_name(OpCategory c) {
  switch (c) {
    case OpCategory::Source: return "source";
    case OpCategory::Movement: return "movement";
    case OpCategory::Memory: return "memory";
    case OpCategory::Unary: return "unary";
    case OpCategory::Binary: return "binary";
    case OpCategory::Ternary: return "ternary";
    case OpCategory::Reduce: return "reduce";
    case OpCategory::Extern: return "extern";
  }
  return "?";
}

bool is_commutative(Op op) {
  switch (op) {
    case Op::Add: case Op::Mul: case Op::Max: case Op::And: case Op::Or: case Op::Xor: case Op::CmpNE:
      return true;
    default: return false;
  }
}

bool is_elementwise(Op op) {
  auto c = op_info(op).category;
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary;
}

std::string_view reduce_op_name(ReduceOp r) {
  switch (r) {
    case ReduceOp::Add: return "add";
    case ReduceOp::Max: return "max";
    case ReduceOp::Mul: return "mul";
  }
  return "?";
}

std::optional<ReduceOp> reduce_op_from_name(std::string_view s) {
  if (s == "add" || s == "sum") return ReduceOp::Add;
  if (s == "max") return ReduceOp::Max;
  if (s == "mul" || s == "prod") return ReduceOp::Mul;
  return std::nullopt;
}

}  // namespace lathe
