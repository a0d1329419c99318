// node.cpp — the NodeStore (hash-consing), attrs hashing, provenance context.
#include "core/ir/node.h"

#include <deque>
#include <mutex>
#include <unordered_map>

#include "core/runtime/host_tensor.h"

namespace lathe {

namespace {
inline void mix(size_t& h, size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }

struct NodeStore {
  std::mutex mu;
  std::deque<Node> nodes;  // stable addresses; index == id
  std::unordered_multimap<size_t, Node*> by_hash;
};
NodeStore& store() {
  static NodeStore* s = new NodeStore();  // never destroyed: nodes outlive static teardown
  return *s;
}

bool same_key(const Node& n, Op op, DType dt, const Shape& shape, const std::vector<NodeRef>& in, const Attrs& a) {
  return n.op == op && n.dtype == dt && n.shape == shape && n.inputs == in && n.attrs == a;
}
}  // namespace

size_t Attrs::hash() const {
  size_t h = std::hash<double>()(f);
  mix(h, std::hash<int64_t>()(i));
  if (data) mix(h, data->content_hash());
  mix(h, std::hash<std::string>()(name));
  mix(h, static_cast<size_t>(axis) * 131);
  mix(h, static_cast<size_t>(reduce));
  for (int a : axes) mix(h, static_cast<size_t>(a) + 17);
  if (view) mix(h, view->hash());
  for (auto x : ints) mix(h, std::hash<int64_t>()(x));
  return h;
}

bool operator==(const Attrs& a, const Attrs& b) {
  if (!(a.f == b.f || (a.f != a.f && b.f != b.f))) return false;  // NaN == NaN for identity
  if (a.i != b.i || a.name != b.name || a.axis != b.axis || a.reduce != b.reduce || a.axes != b.axes ||
      a.ints != b.ints)
    return false;
  if ((a.data == nullptr) != (b.data == nullptr)) return false;
  if (a.data && !a.data->same_content(*b.data)) return false;
  if ((a.view == nullptr) != (b.view == nullptr)) return false;
  if (a.view && !(*a.view == *b.view)) return false;
  return true;
}

double Node::const_value() const {
  if (op != Op::Const || attrs.data) return 0;
  return is_float(dtype) ? attrs.f : static_cast<double>(attrs.i);
}

NodeRef make_node(Op op, DType dtype, Shape shape, std::vector<NodeRef> inputs, Attrs attrs, const Provenance& prov) {
  size_t h = static_cast<size_t>(op) * 0x100000001b3ull;
  mix(h, static_cast<size_t>(dtype));
  for (auto& d : shape) mix(h, d.hash());
  for (auto in : inputs) mix(h, in->hash);
  mix(h, attrs.hash());
  NodeStore& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  auto [b, e] = s.by_hash.equal_range(h);
  for (auto it = b; it != e; ++it)
    if (same_key(*it->second, op, dtype, shape, inputs, attrs)) return it->second;
  Node& n = s.nodes.emplace_back();
  n.id = static_cast<uint32_t>(s.nodes.size() - 1);
  n.op = op;
  n.dtype = dtype;
  n.shape = std::move(shape);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  if (prov.path.empty() && prov.step < 0 && !prov.backward) {
    const ProvenanceContext& pc = current_provenance();
    n.prov = Provenance{pc.path(), pc.step, pc.backward};
  } else {
    n.prov = prov;
  }
  n.hash = h;
  s.by_hash.emplace(h, &n);
  return &n;
}

size_t node_store_size() {
  std::lock_guard<std::mutex> lock(store().mu);
  return store().nodes.size();
}

NodeRef node_by_id(uint32_t id) {
  std::lock_guard<std::mutex> lock(store().mu);
  return id < store().nodes.size() ? &store().nodes[id] : nullptr;
}

std::string ProvenanceContext::path() const {
  std::string r;
  for (auto& s : stack) r += (r.empty() ? "" : "/") + s;
  return r;
}

ProvenanceContext& current_provenance() {
  thread_local ProvenanceContext ctx;
  return ctx;
}

ProvenanceScope::ProvenanceScope(std::string name) { current_provenance().stack.push_back(std::move(name)); }
ProvenanceScope::~ProvenanceScope() { current_provenance().stack.pop_back(); }

}  // namespace lathe
