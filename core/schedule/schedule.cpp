// schedule.cpp — schedule_graph: decide which nodes get buffers and group the rest into
// fused kernels (rules in kernel_graph.h). The matmul pattern match is in contraction.cpp.
#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <functional>

#include "core/ir/diag.h"
#include "core/schedule/kernel_graph.h"
#include "core/schedule/flat_view.h"
#include "core/schedule/view_index.h"

namespace lathe {

namespace {

std::string sanitize(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (r.size() > 24) r.resize(24);
  return r;
}

std::string kernel_label(NodeRef root, const std::string& kind) {
  const std::string& p = root->prov.path;
  if (!p.empty()) {
    auto slash = p.rfind('/');
    return sanitize(slash == std::string::npos ? p : p.substr(slash + 1));
  }
  if (kind == "elementwise" || kind == "reduce") {
    std::string op(op_name(root->op));
    for (auto& c : op) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return op;
  }
  return kind;
}

class Scheduler {
 public:
  Scheduler(const Graph& g, const std::set<NodeRef>& force) : g_(g), order_(g.toposort()), users_(g.users()) {
    mat_.insert(force.begin(), force.end());
  }

  KernelGraph run() {
    initial_materialization();
    for (;;) {
      bool changed = split_shared_reductions();
      changed |= materialize_shared_values();
      changed |= materialize_broadcast_values();
      if (!changed) break;
    }
    materialize_windowed_epilogues();
    fuse_matmul_epilogues();
    return build();
  }

 private:
  const Graph& g_;
  std::vector<NodeRef> order_;
  std::unordered_map<NodeRef, std::vector<NodeRef>> users_;
  std::set<NodeRef> mat_;
  std::unordered_map<NodeRef, NodeRef> epilogue_of_;  // kernel root -> the matmul fused under it

  static bool is_source_buffer(NodeRef n) { return n->op == Op::Input || (n->op == Op::Const && n->attrs.data); }

  void initial_materialization() {
    for (NodeRef n : g_.inputs) mat_.insert(n);
    for (auto& [name, n] : g_.outputs) mat_.insert(n);
    for (NodeRef n : order_) {
      if (is_source_buffer(n)) mat_.insert(n);
      switch (n->op) {
        case Op::Copy: case Op::Assign: mat_.insert(n); break;
        case Op::Extern:
          mat_.insert(n);
          for (NodeRef in : n->inputs) {
            // the fused attention reads a strided view of a buffer in place (a head split or
            // transpose: no copy); lower_attention.cpp addresses it through the view
            if ((n->attrs.name == "attention" || n->attrs.name == "attention_bwd") && in->op == Op::View && in->attrs.view && !in->attrs.view->has_mask() &&
                in->inputs[0]->op != Op::View) {
              mat_.insert(in->inputs[0]);
              continue;
            }
            // the fused recurrence reads a view that is the first elements of a buffer in
            // order (X reshaped to [T·B, I], the last layer's Y rows of its result) from that
            // buffer itself: the same pointer (program.cpp's lower_one), no copy kernel
            if (n->attrs.name == "rnn" && reads_flat_prefix(in)) {
              mat_.insert(in->inputs[0]);
              continue;
            }
            mat_.insert(in);
          }
          break;
        case Op::Reduce:
          if (auto m = match_matmul(n)) {
            mat_.insert(n);
            mat_.insert(m->a.src);
            mat_.insert(m->b.src);
          }
          break;
        default: break;
      }
    }
    // views of inlined nodes must be per-dimension index math, else materialize the input
    bool changed = true;
    while (changed) {
      changed = false;
      for (NodeRef n : order_) {
        if (n->op != Op::View || mat_.count(n->inputs[0])) continue;
        NodeRef in = n->inputs[0];
        if (!view_dim_map(*n->attrs.view, in->shape)) {
          mat_.insert(in);
          changed = true;
        }
      }
    }
  }

  // A reduction reached (without crossing a buffer) from more than one kernel root is
  // computed once into a buffer instead of once per kernel.
  // For each kernel root (a materialized node that is computed), what its kernel reaches
  // below it: inner(n, root) for the unbuffered nodes it computes, buffer(n, root) for the
  // buffers where the walk stops (each once per root).
  template <class Inner, class Buffer>
  void walk_kernels(Inner inner, Buffer buffer) const {
    for (NodeRef root : order_) {
      if (!mat_.count(root) || is_source_buffer(root)) continue;
      std::vector<NodeRef> stack(root->inputs.begin(), root->inputs.end());
      std::set<NodeRef> seen;
      while (!stack.empty()) {
        NodeRef n = stack.back();
        stack.pop_back();
        if (!seen.insert(n).second) continue;
        if (mat_.count(n)) {
          buffer(n, root);
          continue;
        }
        inner(n, root);
        for (NodeRef in : n->inputs) stack.push_back(in);
      }
    }
  }

  bool split_shared_reductions() {
    std::unordered_map<NodeRef, std::set<NodeRef>> roots_of;
    walk_kernels([&](NodeRef n, NodeRef root) { roots_of[n].insert(root); }, [](NodeRef, NodeRef) {});
    bool changed = false;
    for (auto& [n, roots] : roots_of)
      if (n->op == Op::Reduce && roots.size() > 1) changed |= mat_.insert(n).second;
    return changed;
  }

  // A value computed inline is recomputed by every kernel that reads it. That is cheap for one
  // shared value, but a residual stream (h1 = x + f(x), h2 = h1 + g(h1), ...) nests them: every
  // layer's kernels would recompute the chain from the embedding onward, the work growing with
  // depth, and no two layers' kernels would be the same code (none compiled once for all).
  // A "shared top" is an inlined value that two or more kernels read in full (a kernel reading
  // only a slice, like an LSTM step its row of the input projection, recomputes nothing the
  // others compute) and whose readers are not all inside one bigger shared value. Shared tops
  // nested in each other are materialized, all of them; a lone one (a bias add read by two
  // kernels) stays inlined, its recompute bounded and cheaper than a buffer and a launch.
  bool materialize_shared_values() {
    // the kernels that read all of each inlined value: a kernel that reads only a slice (an
    // LSTM step, its row of the input projection) does not recompute the others' part
    std::unordered_map<NodeRef, std::set<NodeRef>> roots_of;
    for (NodeRef root : order_) {
      if (!mat_.count(root) || is_source_buffer(root)) continue;
      std::vector<std::pair<NodeRef, bool>> stack;
      for (NodeRef in : root->inputs) stack.push_back({in, false});
      std::set<std::pair<NodeRef, bool>> seen;
      while (!stack.empty()) {
        auto [n, sliced] = stack.back();
        stack.pop_back();
        if (mat_.count(n) || !seen.insert({n, sliced}).second) continue;
        if (!sliced) roots_of[n].insert(root);
        bool slices = false;
        if (n->op == Op::View) {
          SymInt out = shape_numel(n->shape), in = shape_numel(n->inputs[0]->shape);
          slices = out.is_const() && in.is_const() && out.value() < in.value();
        }
        for (NodeRef in : n->inputs) stack.push_back({in, sliced || slices});
      }
    }
    // n is a top when a user is computed by other kernels (or is a kernel root); views are
    // index math only, so a view's users count as n's own
    std::function<bool(NodeRef, const std::set<NodeRef>&)> is_top = [&](NodeRef n, const std::set<NodeRef>& roots) {
      for (NodeRef u : users_[n]) {
        if (mat_.count(u)) return true;
        auto it = roots_of.find(u);
        if (it == roots_of.end() || it->second != roots) return true;
        if (u->op == Op::View && is_top(u, roots)) return true;
      }
      return false;
    };
    auto is_scalar = [](NodeRef x) {
      return std::all_of(x->shape.begin(), x->shape.end(), [](const SymInt& d) { return d == SymInt(1); });
    };
    std::unordered_map<NodeRef, int> depth;                    // shared top -> longest chain ending at it
    std::unordered_map<NodeRef, std::vector<NodeRef>> below;  // shared top -> the tops inside it
    std::vector<NodeRef> picks;
    std::set<NodeRef> picked;
    for (NodeRef n : order_) {
      auto it = roots_of.find(n);
      if (it == roots_of.end() || it->second.size() < 2) continue;
      if (n->op == Op::View || n->op == Op::Const || n->op == Op::Index || !is_top(n, it->second)) continue;
      bool reads_tensor = false;
      int d = 1;
      std::vector<NodeRef> inner;
      std::set<NodeRef> seen;
      std::vector<NodeRef> stack(n->inputs.begin(), n->inputs.end());
      while (!stack.empty()) {
        NodeRef x = stack.back();
        stack.pop_back();
        if (!seen.insert(x).second) continue;
        if (mat_.count(x)) {
          reads_tensor |= !is_scalar(x);
          continue;
        }
        if (auto dt = depth.find(x); dt != depth.end()) {
          d = std::max(d, dt->second + 1);
          inner.push_back(x);
        }
        for (NodeRef in : x->inputs) stack.push_back(in);
      }
      if (!reads_tensor) continue;  // computed from indices and scalars: cheaper than a load
      depth[n] = d;
      below[n] = std::move(inner);
      if (d < 2) continue;
      std::vector<NodeRef> todo{n};
      while (!todo.empty()) {
        NodeRef x = todo.back();
        todo.pop_back();
        if (!picked.insert(x).second) continue;
        picks.push_back(x);
        for (NodeRef y : below[x]) todo.push_back(y);
      }
    }
    for (NodeRef n : picks) mat_.insert(n);
    return !picks.empty();
  }

  // A value computed inline is recomputed once per element of each view that reads it. When
  // a view broadcasts it out to many times its size (BERT's padding mask, (1 - float(mask))
  // * -10000 over 128 keys, added to 12 x 128 x 128 attention scores), every kernel that
  // reads it recomputes the chain (an i64 -> f32 conversion, which AVX2 does element by
  // element, and which held the softmax loops to 4 lanes) for each score, in each pass of
  // the softmax: BERT-base's softmax kernels took ~1.0 ms each, 0.34 ms with the mask read
  // from a 128-float buffer (median, same run, loaded 2-core AVX2 host). Such a value is
  // computed once into a small buffer instead, when it is
  // computed from a tensor (not only from indices and scalars: an iota or a causal mask is
  // cheaper to compute than to load), contains no inlined reduction (a layernorm's
  // per-row statistics are the row kernel's own), and its largest broadcast reads it at
  // least kMinBroadcast times over (and kMinBroadcastElems elements), so that the saving
  // outweighs one more small kernel. A single cheap op (ResNet's mean = sum * 1/49 read by
  // the classifier, a gather) costs about what loading its result would, and stays inline.
  static constexpr int64_t kMinBroadcast = 16, kMinBroadcastElems = 32768;
  bool materialize_broadcast_values() {
    auto numel = [](NodeRef x) -> int64_t {
      SymInt s = shape_numel(x->shape);
      return s.is_const() ? s.value() : -1;
    };
    // the largest element count of a chain of views over x
    std::function<int64_t(NodeRef)> widest_view = [&](NodeRef x) {
      int64_t w = -1;
      for (NodeRef u : users_[x])
        if (u->op == Op::View) w = std::max({w, numel(u), widest_view(u)});
      return w;
    };
    bool changed = false;
    for (NodeRef n : order_) {
      if (mat_.count(n) || n->op == Op::View || n->op == Op::Const || n->op == Op::Index || n->op == Op::Input ||
          n->op == Op::Reduce)
        continue;
      const int64_t size = numel(n);
      if (size <= 1) continue;
      const int64_t wide = widest_view(n);
      if (wide < kMinBroadcastElems || wide < kMinBroadcast * size) continue;
      bool reads_tensor = false, reduces = false;
      int ops = 1 + (n->op == Op::Cast);  // the work per element, a conversion counted twice
      std::set<NodeRef> seen;
      std::vector<NodeRef> stack(n->inputs.begin(), n->inputs.end());
      while (!stack.empty() && !reduces) {
        NodeRef x = stack.back();
        stack.pop_back();
        if (!seen.insert(x).second) continue;
        if (mat_.count(x)) {
          reads_tensor |= numel(x) != 1;
          continue;
        }
        reduces |= x->op == Op::Reduce;
        if (x->op != Op::View && x->op != Op::Const && x->op != Op::Index) ops += 1 + (x->op == Op::Cast);
        for (NodeRef in : x->inputs) stack.push_back(in);
      }
      if (!reads_tensor || reduces || ops < 2) continue;
      changed |= mat_.insert(n).second;
    }
    return changed;
  }

  // An elementwise chain on a matmul's result (a convolution's bias and activation) that
  // is then read through a window or padding view (the next depthwise convolution or
  // pooling) would be recomputed inside that kernel once per window tap. Its last node is
  // materialized instead, so that the chain becomes the matmul's epilogue (written once,
  // into the buffer the matmul wrote anyway). A chain that changes dtype (an int8
  // contraction's requantization, u8, then its dequantization, f32, before a max pool) ends
  // at its narrowest value, the last of them: the window reads 1-byte values, not 4.
  // A view that only inserts or drops size-1 dims of its input (in its row-major order).
  static bool only_unit_dims(NodeRef v) {
    const ViewSpec& s = *v->attrs.view;
    NodeRef in = v->inputs[0];
    if (s.has_mask() || s.offset != SymInt(0)) return false;
    std::vector<SymInt> a, b, want;
    for (auto& d : s.shape)
      if (d != SymInt(1)) a.push_back(d);
    auto st = contiguous_strides(in->shape);
    for (size_t j = 0; j < in->shape.size(); ++j)
      if (in->shape[j] != SymInt(1)) b.push_back(in->shape[j]), want.push_back(st[j]);
    if (a != b) return false;
    size_t i = 0;
    for (size_t d = 0; d < s.shape.size(); ++d)
      if (s.shape[d] != SymInt(1) && s.strides[d] != want[i++]) return false;
    return true;
  }

  // LATHE_NARROW_REQUANT=0: the residual's reads of i32 sums as before (A/B runs)
  static bool narrow_requant_past_epilogue() {
    static const bool on = [] {
      const char* e = std::getenv("LATHE_NARROW_REQUANT");
      return !(e && std::string(e) == "0");
    }();
    return on;
  }

  void materialize_windowed_epilogues() {
    std::set<NodeRef> outputs;
    for (auto& [name, n] : g_.outputs) outputs.insert(n);
    for (NodeRef r : order_) {
      if (r->op != Op::Reduce || !mat_.count(r) || outputs.count(r) || !match_matmul(r)) continue;
      NodeRef cur = r, end = nullptr;
      std::vector<NodeRef> chain;  // the nodes that may be the epilogue's root
      for (;;) {
        const auto& us = users_[cur];
        if (us.size() != 1 || mat_.count(us[0])) break;
        NodeRef u = us[0];
        // an int8 contraction's chain passes through f32 values that may not be its root
        // (only its 8-bit requantization may): elementwise steps at the same positions
        const bool fusable = fusable_epilogue(u, r, mat_);
        auto cat = u->info().category;
        // (and the views that only reshape by size-1 dims, e.g. a conv's [N,1,M,1,H,W,1,1] sums
        // read as [N,M,H,W] by the dequantized residual sum)
        const bool squeeze = u->op == Op::View && only_unit_dims(u);
        if (!fusable && (r->dtype != DType::I32 || (u->shape != cur->shape && !squeeze) ||
                         (!squeeze && u->op != Op::Cast && cat != OpCategory::Unary && cat != OpCategory::Binary)))
          break;
        cur = u;
        if (!fusable) continue;
        chain.push_back(cur);
        if (cur->op != Op::View) end = cur;
      }
      if (!end) continue;
      bool windowed = false;
      for (NodeRef u : users_[end]) windowed |= u->op == Op::View;
      for (NodeRef u : users_[cur]) windowed |= u->op == Op::View && cur != end;
      NodeRef narrowest = nullptr;  // the last of the narrowest values (end, when all are as wide)
      for (NodeRef n : chain)
        if (n->op != Op::View && n->dtype != DType::Bool && (!narrowest || dtype_size(n->dtype) <= dtype_size(narrowest->dtype)))
          narrowest = n;
      // An int8 contraction's requantization read on by steps that cannot be its epilogue
      // (ResNet's residual sum of two dequantized convs, in f32): the kernel reading it would
      // read the i32 sums and requantize them itself; the 8-bit value is written instead (by
      // the GEMM, in its write-back) and read at a quarter of the bytes.
      const bool narrow_past = cur != end && r->dtype == DType::I32 && narrowest && dtype_size(narrowest->dtype) == 1 &&
                               narrow_requant_past_epilogue();
      if (!windowed && !narrow_past) continue;
      mat_.insert(narrowest ? narrowest : end);
    }
  }

  // A matmul read by exactly one kernel, whose work is elementwise at the matmul's own
  // positions (bias, activation, residual), computes that kernel's root in its write-back.
  void fuse_matmul_epilogues() {
    std::unordered_map<NodeRef, std::set<NodeRef>> readers;  // buffer node -> kernel roots
    walk_kernels([](NodeRef, NodeRef) {}, [&](NodeRef n, NodeRef root) { readers[n].insert(root); });
    std::set<NodeRef> outputs;
    for (auto& [name, n] : g_.outputs) outputs.insert(n);
    for (NodeRef r : order_) {
      if (r->op != Op::Reduce || !mat_.count(r) || outputs.count(r) || readers[r].size() != 1) continue;
      NodeRef root = *readers[r].begin();
      if (epilogue_of_.count(root) || root->op == Op::Copy || root->op == Op::Assign || root->op == Op::Extern) continue;
      auto m = match_matmul(r);
      if (!m) continue;
      SymInt K = 1;
      for (int d : m->k_axes) K = K * m->mul->shape[d];
      if (!K.is_const() || K.value() <= 0 || !fusable_epilogue(root, r, mat_)) continue;
      mat_.erase(r);
      epilogue_of_[root] = r;
    }
  }

  KernelGraph build() {
    KernelGraph kg;
    kg.graph = g_;
    kg.symbols = g_.symbols();
    auto add_buffer = [&](NodeRef n, BufferKind kind, const std::string& name) {
      BufferDesc b;
      b.id = (int)kg.buffers.size();
      b.name = name;
      b.dtype = n->dtype;
      b.shape = n->shape;
      b.kind = kind;
      b.node = n;
      kg.buffer_of[n] = b.id;
      kg.buffers.push_back(b);
    };
    for (NodeRef n : g_.inputs) add_buffer(n, BufferKind::Input, n->attrs.name);
    for (auto& [name, n] : g_.outputs)
      if (!kg.buffer_of.count(n)) add_buffer(n, is_source_buffer(n) ? BufferKind::Constant : BufferKind::Output, name);
    for (NodeRef n : order_)
      if (mat_.count(n) && !kg.buffer_of.count(n))
        add_buffer(n, is_source_buffer(n) ? BufferKind::Constant : BufferKind::Intermediate, "t" + std::to_string(n->id));
    for (auto& [name, n] : g_.outputs) kg.outputs.push_back({name, kg.buffer_of.at(n)});

    for (NodeRef root : order_) {
      if (!mat_.count(root) || is_source_buffer(root)) continue;
      Kernel k;
      k.id = (int)kg.kernels.size();
      k.root = root;
      k.output = kg.buffer_of.at(root);
      // nodes inside: everything reachable from the root without crossing a buffer
      std::set<NodeRef> inside;
      std::set<int> reads;
      std::vector<NodeRef> stack{root};
      while (!stack.empty()) {
        NodeRef n = stack.back();
        stack.pop_back();
        if (!inside.insert(n).second) continue;
        for (NodeRef in : n->inputs) {
          if (mat_.count(in)) reads.insert(kg.buffer_of.at(in));
          else stack.push_back(in);
        }
      }
      for (NodeRef n : order_)
        if (inside.count(n)) k.nodes.push_back(n);
      k.inputs.assign(reads.begin(), reads.end());
      bool has_reduce = std::any_of(k.nodes.begin(), k.nodes.end(), [](NodeRef n) { return n->op == Op::Reduce; });
      if (root->op == Op::Extern)
        k.kind = root->attrs.name == "attention" || root->attrs.name == "attention_bwd" ? root->attrs.name : "extern";
      else if (epilogue_of_.count(root)) {
        k.kind = "matmul";
        k.matmul = epilogue_of_.at(root);
      } else if (root->op == Op::Reduce && match_matmul(root)) {
        k.kind = "matmul";
        k.matmul = root;
      } else if (has_reduce) k.kind = "reduce";
      else if (root->op == Op::Copy) k.kind = "copy";
      else k.kind = "elementwise";
      k.name = "k" + std::to_string(k.id) + "_" + kernel_label(root, k.kind);
      for (NodeRef n : k.nodes) kg.kernels_of[n].push_back(k.id);
      kg.kernels.push_back(std::move(k));
    }
    return kg;
  }
};

}  // namespace

KernelGraph schedule_graph(const Graph& g, const std::set<NodeRef>& force) {
  return Scheduler(g, force).run();
}

}  // namespace lathe
