// lower_misc.cpp — ONNX Einsum, Trilu, CumSum, TopK, OneHot, DepthToSpace, SpaceToDepth.
//
// Einsum: every operand is permuted and reshaped onto one shared index space (output
// letters first, then summed letters), the operands are multiplied with broadcasting, and
// the summed letters are reduced. Ellipses broadcast; a letter repeated within one operand
// takes that operand's diagonal first. TopK ranks each element by counting the elements before
// it (larger, or equal with a smaller index): O(n²) along the axis, exact, ties by index.
#include <map>

#include "core/import/onnx_lower.h"

namespace lathe::onnx_import {
namespace {

struct Term {
  std::string letters;  // one char per dim; ellipsis dims use '0'+k (k from the right)
};

std::string strip(const std::string& s) {
  std::string r;
  for (char ch : s) if (ch != ' ') r += ch;
  return r;
}

// Expands "..." in one term for an operand of the given rank.
std::string expand_term(const NodeCtx& c, const std::string& t, int rank, int* ell_rank) {
  size_t e = t.find("...");
  std::string letters = t;
  if (e == std::string::npos) {
    if (static_cast<int>(t.size()) != rank) c.fail("equation term '" + t + "' has " + std::to_string(t.size()) + " letters for an operand of rank " + std::to_string(rank));
    return t;
  }
  std::string before = t.substr(0, e), after = t.substr(e + 3);
  int n = rank - static_cast<int>(before.size() + after.size());
  if (n < 0) c.fail("equation term '" + t + "' has more letters than the operand's rank " + std::to_string(rank));
  *ell_rank = std::max(*ell_rank, n);
  std::string mid;
  for (int k = n - 1; k >= 0; --k) mid += static_cast<char>('0' + k);
  return before + mid + after;
}

void einsum_op(NodeCtx& c) {
  c.only_outputs(1);
  std::string eq = strip(c.attr_string("equation", ""));
  std::vector<Tensor> xs = c.all_inputs();
  if (xs.empty()) c.fail("needs at least one input");
  for (auto& x : xs) require_same_dtype(c, xs[0], x);
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (terms.size() != xs.size()) c.fail("equation '" + eq + "' has " + std::to_string(terms.size()) + " terms for " + std::to_string(xs.size()) + " inputs");
  int ell = 0;
  std::vector<std::string> ops;
  std::map<char, int> count;
  for (size_t i = 0; i < xs.size(); ++i) {
    for (char ch : terms[i]) if (ch != '.' && !std::isalpha(static_cast<unsigned char>(ch))) c.fail("bad character in equation '" + eq + "'");
    ops.push_back(expand_term(c, terms[i], xs[i].rank(), &ell));
    // a letter repeated within one operand takes the diagonal: one strided View over the
    // contiguous operand whose dim has the two dims' strides summed
    for (size_t p = 0; p < ops.back().size(); ++p) {
      size_t q = ops.back().find(ops.back()[p], p + 1);
      if (q == std::string::npos) continue;
      Tensor x = contiguous(xs[i]);
      if (x.shape()[p] != x.shape()[q]) c.fail("index '" + std::string(1, ops.back()[p]) + "' labels dims of different sizes in '" + eq + "'");
      std::vector<SymInt> cs = contiguous_strides(x.shape());
      ViewSpec v;
      for (size_t d = 0; d < x.shape().size(); ++d) {
        if (d == q) continue;
        v.shape.push_back(x.shape()[d]);
        v.strides.push_back(d == p ? cs[p] + cs[q] : cs[d]);
      }
      xs[i] = Tensor(prim::view(x.node(), v));
      ops.back().erase(q, 1);
      --p;  // the letter may repeat a third time
    }
    for (char ch : ops.back()) ++count[ch];
  }
  std::string out;
  if (arrow != std::string::npos) {
    std::string rhs = eq.substr(arrow + 2);
    size_t e = rhs.find("...");
    if (e != std::string::npos) {
      std::string mid;
      for (int k = ell - 1; k >= 0; --k) mid += static_cast<char>('0' + k);
      rhs = rhs.substr(0, e) + mid + rhs.substr(e + 3);
    }
    out = rhs;
    for (char ch : out) if (!count.count(ch)) c.fail("output index '" + std::string(1, ch) + "' does not appear in the inputs");
  } else {
    for (int k = ell - 1; k >= 0; --k) out += static_cast<char>('0' + k);
    for (auto& [ch, n] : count) if (n == 1 && std::isalpha(static_cast<unsigned char>(ch))) out += ch;
  }
  std::string all = out;
  for (auto& op : ops) for (char ch : op) if (all.find(ch) == std::string::npos) all += ch;
  Tensor prod;
  for (size_t i = 0; i < xs.size(); ++i) {
    const std::string& op = ops[i];
    std::vector<int> perm;
    Shape s;
    for (char ch : all) {
      size_t p = op.find(ch);
      if (p == std::string::npos) { s.push_back(1); continue; }
      perm.push_back(static_cast<int>(p));
      s.push_back(xs[i].shape()[p]);
    }
    Tensor t = reshape(permute(xs[i], perm), s);
    prod = prod.defined() ? prod * t : t;
  }
  Axes red;
  for (size_t k = out.size(); k < all.size(); ++k) red.push_back(static_cast<int>(k));
  Tensor r = red.empty() ? prod : sum(prod, red, true);
  Shape os(prod.shape().begin(), prod.shape().begin() + out.size());
  c.set(0, to(reshape(r, os), xs[0].dtype()));
}

void trilu_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  int64_t k = 0;
  if (c.has(1)) {
    std::vector<int64_t> kv = c.ints_in(1);
    if (kv.size() != 1) c.fail("k must hold one value");
    k = kv[0];
  }
  if (x.rank() < 2) c.fail("input must have rank >= 2, got " + x.describe());
  c.set(0, c.attr_int("upper", 1) ? triu(x, k) : tril(x, k));
}

void cumsum_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  if (x.rank() == 0) c.fail("input must have rank >= 1");
  std::vector<int64_t> axv = c.ints_in(1);
  if (axv.size() != 1) c.fail("axis must hold one value");
  int ax = c.axis(axv[0], x.rank());
  bool rev = c.attr_int("reverse", 0) != 0, excl = c.attr_int("exclusive", 0) != 0;
  Tensor y = rev ? flip(x, {ax}) : x;
  Tensor s = to(cumsum(y, ax), x.dtype());
  if (excl) {
    std::vector<std::pair<SymInt, SymInt>> pairs(x.rank(), {0, 0});
    pairs[ax] = {1, 0};
    s = narrow(pad(s, pairs, Scalar(0)), ax, 0, x.shape()[ax]);
  }
  c.set(0, rev ? flip(s, {ax}) : s);
}

void topk_op(NodeCtx& c) {
  Tensor x = c.in(0);
  if (x.rank() == 0) c.fail("input must have rank >= 1");
  int ax = c.axis(c.attr_int("axis", -1), x.rank());
  int64_t k = c.attr_int("k", 0);
  if (c.opset() >= 10) {
    std::vector<int64_t> kv = c.ints_in(1);
    if (kv.size() != 1) c.fail("K must hold one value");
    k = kv[0];
  }
  SymInt n = x.shape()[ax];
  if (!n.is_const()) c.unsupported("TopK along a symbolic dim");
  if (k < 0 || k > n.value()) c.fail("k = " + std::to_string(k) + " is out of range for a dim of " + std::to_string(n.value()));
  bool largest = c.attr_int("largest", 1) != 0;
  // pairwise [.., n(i), n(j), ..]: is element j ranked before element i?
  Tensor xi = unsqueeze(x, ax + 1), xj = unsqueeze(x, ax);
  Shape pair = x.shape();
  pair.insert(pair.begin() + ax + 1, n);
  Tensor ii(prim::index(DType::I64, pair, ax)), jj(prim::index(DType::I64, pair, ax + 1));
  Tensor better = largest ? gt(xj, xi) : lt(xj, xi);
  Tensor before = logical_or(better, logical_and(eq(xj, xi), lt(jj, ii)));
  Tensor rank = sum(to(before, DType::I64), {ax + 1}, false);  // [.., n(i), ..]
  // select, for each output slot r < k, the element whose rank is r
  Shape sel = x.shape();
  sel.insert(sel.begin() + ax + 1, k);                         // [.., n(i), k(r), ..]
  Tensor r(prim::index(DType::I64, sel, ax + 1));
  Tensor hit = eq(unsqueeze(rank, ax + 1), r);
  Tensor vals = sum(where(hit, unsqueeze(x, ax + 1), zeros({}, x.dtype())), {ax}, false);
  Tensor pos(prim::index(DType::I64, sel, ax));
  Tensor idx = sum(where(hit, pos, zeros({}, DType::I64)), {ax}, false);
  c.set(0, to(vals, x.dtype()));
  if (c.wants(1)) c.set(1, idx);
}

void one_hot_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor idx = c.in(0), values = c.in(2);
  double depth_v = c.scalar_in(1);
  if (!(depth_v >= 1 && depth_v <= static_cast<double>(c.max_elements()))) c.fail("depth must be a positive number of classes");
  int64_t depth = static_cast<int64_t>(depth_v);
  if (shape_numel(values.shape()) != SymInt(2)) c.fail("values must hold [off, on], got " + values.describe());
  int ax = c.axis(c.attr_int("axis", -1), idx.rank() + 1);
  Tensor id = to(idx, DType::I64);
  id = where(lt(id, 0), id + depth, id);
  Shape s = idx.shape();
  s.insert(s.begin() + ax, depth);
  Tensor cls(prim::index(DType::I64, s, ax));
  Tensor v = reshape(values, {2});
  Tensor off = reshape(slice(v, 0, 0, 1), {}), on = reshape(slice(v, 0, 1, 2), {});
  c.set(0, where(eq(unsqueeze(id, ax), cls), on, off));
}

void depth_space_op(NodeCtx& c, bool to_space) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  if (x.rank() != 4) c.fail("input must be [N, C, H, W], got " + x.describe());
  int64_t b = c.attr_int("blocksize", 0);
  if (b <= 0) c.fail("blocksize must be positive");
  SymInt N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (to_space) {
    SymInt Cb = floordiv(C, SymInt(b * b));
    bool crd = c.attr_string("mode", "DCR") == "CRD";
    Tensor t = crd ? permute(reshape(x, {N, Cb, b, b, H, W}), {0, 1, 4, 2, 5, 3})
                   : permute(reshape(x, {N, b, b, Cb, H, W}), {0, 3, 4, 1, 5, 2});
    c.set(0, reshape(t, {N, Cb, H * SymInt(b), W * SymInt(b)}));
  } else {
    SymInt Hb = floordiv(H, SymInt(b)), Wb = floordiv(W, SymInt(b));
    Tensor t = permute(reshape(x, {N, C, Hb, b, Wb, b}), {0, 3, 5, 1, 2, 4});
    c.set(0, reshape(t, {N, C * SymInt(b * b), Hb, Wb}));
  }
}

}  // namespace

void add_misc_ops(OpTable& t) {
  t["Einsum"] = einsum_op;
  t["Trilu"] = trilu_op;
  t["CumSum"] = cumsum_op;
  t["TopK"] = topk_op;
  t["OneHot"] = one_hot_op;
  t["DepthToSpace"] = [](NodeCtx& c) { depth_space_op(c, true); };
  t["SpaceToDepth"] = [](NodeCtx& c) { depth_space_op(c, false); };
}

}  // namespace lathe::onnx_import
