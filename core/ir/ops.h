// ops.h — the principal operators, generated from ops.def.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace lathe {

enum class Op : uint8_t {
#define LATHE_OP(name, cat, arity, doc) name,
#include "core/ir/ops.def"
#undef LATHE_OP
};

enum class OpCategory : uint8_t { Source, Movement, Memory, Unary, Binary, Ternary, Reduce, Extern };

constexpr int kNumOps = 0
#define LATHE_OP(name, cat, arity, doc) +1
#include "core/ir/ops.def"
#undef LATHE_OP
    ;

struct OpInfo {
  std::string_view name;
  OpCategory category;
  int arity;  // -1: variadic
  std::string_view doc;
};

const OpInfo& op_info(Op op);
inline std::string_view op_name(Op op) { return op_info(op).name; }
std::optional<Op> op_from_name(std::string_view name);
std::string_view category_name(OpCategory c);

// Commutative binary ops (the pattern matcher tries both operand orders).
bool is_commutative(Op op);
// Ops whose inputs and output are elementwise-aligned (unary, binary, ternary, Cast).
bool is_elementwise(Op op);

enum class ReduceOp : uint8_t { Add, Max, Mul };
std::string_view reduce_op_name(ReduceOp r);
std::optional<ReduceOp> reduce_op_from_name(std::string_view);

}  // namespace lathe
