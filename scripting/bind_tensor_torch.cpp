// bind_tensor_torch.cpp — PyTorch names that are compositions of the frontend's ops:
// x:dim(), x:numel(), x:masked_fill(mask, v), x:expand_as(y), x:clone() and
// lathe.einsum(equation, a [, b, …]). (x.T is a property: bind_tensor.cpp's __index.)
//
// einsum: operands' subscripts are letters; "->" names the output (without it: the letters
// that occur once, in alphabetical order, as torch.einsum does). Every operand is permuted
// to one order of all letters (output letters first, then the summed ones), size-1 dims
// stand in for its missing letters, the operands are multiplied with broadcasting and the
// summed letters reduced: "ij,jk->ik" and "bij,bjk->bik" become the expand-multiply-sum
// contraction that matmul is, which the scheduler lowers as a matmul kernel. A letter
// repeated inside one operand (a diagonal, "ii->i") and "..." are errors that say so.
#include <algorithm>
#include <map>

#include "core/ir/diag.h"
#include "scripting/tensor_args.h"

namespace lathe::script {

namespace {

int m_dim(lua_State* L) {
  lua_pushinteger(L, static_cast<lua_Integer>(check_node(L, 1)->shape.size()));
  return 1;
}

int m_numel(lua_State* L) {
  NodeRef n = check_node(L, 1);
  int64_t count = 1;
  for (const SymInt& d : n->shape) {
    auto v = d.try_value();
    if (!v) raise(L, "numel: the shape " + shape_to_string(n->shape) + " has symbolic dims (bind them first, or use x:size())");
    count *= *v;
  }
  lua_pushinteger(L, static_cast<lua_Integer>(count));
  return 1;
}

// x:masked_fill(mask, value): value where mask is true, x elsewhere (mask broadcasts).
int m_masked_fill(lua_State* L) {
  Tensor x = tensor_arg(L, 1), mask = tensor_arg(L, 2);
  if (mask.dtype() != DType::Bool) raise(L, "masked_fill: the mask must be bool, got " + mask.describe());
  Tensor fill = is_tensor_like(L, 3) ? to(tensor_arg(L, 3), x.dtype()) : scalar_like(x, scalar_arg(L, 3));
  Tensor r = where(mask, fill, x);
  if (r.shape() != x.shape()) raise(L, "masked_fill: the mask " + mask.describe() + " must broadcast to " + x.describe());
  push_tensor(L, r);
  return 1;
}

int m_expand_as(lua_State* L) {
  push_tensor(L, expand(tensor_arg(L, 1), tensor_arg(L, 2).shape()));
  return 1;
}

// Tensors are immutable values: a clone is the tensor itself.
int m_clone(lua_State* L) {
  push_tensor(L, tensor_arg(L, 1));
  return 1;
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

Tensor einsum(const std::string& equation, const std::vector<Tensor>& ops) {
  auto fail = [&](const std::string& why) -> void { throw UserError("einsum \"" + equation + "\": " + why); };
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  if (eq.find("...") != std::string::npos) fail("'...' (broadcast dims) is not supported; name every dim with a letter");
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> subs;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    subs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (subs.size() != ops.size())
    fail("the equation has " + std::to_string(subs.size()) + " operand" + (subs.size() == 1 ? "" : "s") + " but " +
         std::to_string(ops.size()) + (ops.size() == 1 ? " tensor was" : " tensors were") + " given");
  std::map<char, int> count;
  std::map<char, SymInt> size;
  for (size_t i = 0; i < subs.size(); ++i) {
    const std::string& s = subs[i];
    for (char c : s)
      if (!is_letter(c)) fail(std::string("unexpected '") + c + "' (subscripts are letters, operands separated by ',')");
    if (static_cast<int>(s.size()) != ops[i].rank())
      fail("operand " + std::to_string(i + 1) + " has subscripts '" + s + "' (" + std::to_string(s.size()) + " dims) but is " +
           ops[i].describe());
    for (size_t a = 0; a < s.size(); ++a) {
      if (s.find(s[a]) != a)
        fail(std::string("'") + s[a] + "' repeats in operand " + std::to_string(i + 1) +
             " (diagonals and traces are not supported)");
      ++count[s[a]];
      SymInt d = ops[i].dim(static_cast<int>(a));
      auto it = size.find(s[a]);
      if (it == size.end() || it->second == SymInt(1)) size[s[a]] = d;
      else if (d != it->second && d != SymInt(1))
        fail(std::string("'") + s[a] + "' is " + it->second.to_string() + " in one operand and " + d.to_string() + " in operand " +
             std::to_string(i + 1));
    }
  }
  std::string out;
  if (arrow == std::string::npos) {
    for (auto& [c, n] : count)
      if (n == 1) out += c;
  } else {
    out = eq.substr(arrow + 2);
    for (size_t a = 0; a < out.size(); ++a) {
      if (!is_letter(out[a])) fail(std::string("unexpected '") + out[a] + "' in the output subscripts");
      if (!count.count(out[a])) fail(std::string("output letter '") + out[a] + "' is in no operand");
      if (out.find(out[a]) != a) fail(std::string("output letter '") + out[a] + "' repeats");
    }
  }
  // one order of all letters: the output's, then the summed ones in order of appearance
  std::string all = out;
  for (auto& s : subs)
    for (char c : s)
      if (all.find(c) == std::string::npos) all += c;
  ProvenanceScope ps("einsum");
  std::optional<Tensor> prod;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string& s = subs[i];
    std::vector<int> perm;  // the operand's dims in `all` order
    for (char c : all)
      if (auto p = s.find(c); p != std::string::npos) perm.push_back(static_cast<int>(p));
    Tensor t = perm.size() > 1 ? permute(ops[i], perm) : ops[i];
    for (size_t a = 0; a < all.size(); ++a)  // size-1 dims for the letters it lacks
      if (s.find(all[a]) == std::string::npos) t = unsqueeze(t, static_cast<int>(a));
    prod = prod ? *prod * t : t;
  }
  Tensor r = *prod;
  Shape full;
  for (char c : all) full.push_back(size[c]);
  if (r.shape() != full) r = expand(r, full);  // a lone operand's broadcast letters
  if (all.size() > out.size()) {
    Axes summed;
    for (size_t a = out.size(); a < all.size(); ++a) summed.push_back(static_cast<int>(a));
    r = sum(r, summed, false);
  }
  return r;
}

int l_einsum(lua_State* L) {
  std::string eq = luaL_checkstring(L, 1);
  std::vector<Tensor> ops;
  if (lua_istable(L, 2) && !is_tensor_like(L, 2)) {  // lathe.einsum("ij,jk->ik", {a, b})
    for (lua_Integer i = 1, n = luaL_len(L, 2); i <= n; ++i) {
      lua_rawgeti(L, 2, i);
      ops.push_back(tensor_arg(L, lua_gettop(L)));
      lua_pop(L, 1);
    }
  } else {
    for (int i = 2; i <= lua_gettop(L); ++i) ops.push_back(tensor_arg(L, i));
  }
  if (ops.empty()) raise(L, "einsum: no operands (lathe.einsum(\"ij,jk->ik\", a, b))");
  push_tensor(L, einsum(eq, ops));
  return 1;
}

const Function kModule[] = {
    {"einsum", l_einsum, "lathe.einsum(equation, a [, b, …])",
     "Einstein summation: \"ij,jk->ik\" (matmul), \"bij,bjk->bik\" (bmm), \"ij->ji\", \"ij->\", \"i,j->ij\" …; letters only"},
    {nullptr, nullptr, nullptr, nullptr},
};
const Function kMethods[] = {
    {"dim", m_dim, "x:dim()", "the number of dims (= x.rank, x.ndim)"},
    {"numel", m_numel, "x:numel()", "the number of elements (an error for symbolic dims)"},
    {"masked_fill", m_masked_fill, "x:masked_fill(mask, value)", "value where the bool mask is true, x elsewhere (mask broadcasts)"},
    {"expand_as", m_expand_as, "x:expand_as(y)", "x:expand(y's shape)"},
    {"clone", m_clone, "x:clone()", "the same tensor (lazy tensors are immutable values)"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void bind_tensor_torch(lua_State* L, int module) {
  register_functions(L, module, kModule, "lathe.");
  add_tensor_methods(L, module, kMethods);
}

}  // namespace lathe::script
