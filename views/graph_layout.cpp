// graph_layout.cpp — the Graphviz wrapper and its worker thread.
//
// [SECTION] dot layout (cgraph in, ND_coord / ED_spl out)
// [SECTION] LayoutEngine: one worker, newest request wins, small cache
#include "views/graph_layout.h"

#include <gvc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "views/display_graph.h"

namespace lathe::views {

std::mutex& graphviz_mutex() {
  static std::mutex m;
  return m;
}

LayoutRequest make_layout_request(const DisplayGraph& dg) {
  LayoutRequest r;
  r.key = dg.key;
  r.sizes.reserve(dg.nodes.size());
  for (auto& b : dg.nodes) r.sizes.push_back({b.w, b.h});
  r.edges.reserve(dg.edges.size());
  for (auto& e : dg.edges) r.edges.push_back({e.from, e.to});
  r.box_order.reserve(dg.nodes.size());
  for (auto& b : dg.nodes) r.box_order.push_back(b.rep);
  if (!dg.frames.empty()) {
    r.box_frame.reserve(dg.nodes.size());
    for (auto& b : dg.nodes) r.box_frame.push_back(b.frame);
    for (auto& f : dg.frames) r.frame_parent.push_back(f.parent), r.frame_title_w.push_back(f.title_w);
  }
  return r;
}

//-----------------------------------------------------------------------------
// [SECTION] dot layout (cgraph in, ND_coord / ED_spl out)
//-----------------------------------------------------------------------------

namespace {

// When dot cannot run, boxes still need places: a plain grid in input order.
void grid_layout(const LayoutRequest& r, Layout& out) {
  int cols = std::max(1, static_cast<int>(std::ceil(std::sqrt(double(r.sizes.size())))));
  float cell_w = 0, cell_h = 0;
  for (auto& [w, h] : r.sizes) cell_w = std::max(cell_w, w), cell_h = std::max(cell_h, h);
  cell_w += 30, cell_h += 30;
  out.centers.resize(r.sizes.size());
  for (size_t i = 0; i < r.sizes.size(); ++i)
    out.centers[i] = {(i % cols + 0.5f) * cell_w, (i / cols + 0.5f) * cell_h};
  out.width = cols * cell_w;
  out.height = ((r.sizes.size() + cols - 1) / cols) * cell_h;
  for (auto& [a, b] : r.edges) {
    LayoutEdge e;
    e.from = a, e.to = b;
    Point p = out.centers[a], q = out.centers[b];
    e.bezier = {p, {p.x, (p.y + q.y) / 2}, {q.x, (p.y + q.y) / 2}, q};
    out.edges.push_back(std::move(e));
  }
}

char* cs(const char* s) { return const_cast<char*>(s); }

}  // namespace

Layout run_dot_layout(const LayoutRequest& r) {
  Layout out;
  out.key = r.key;
  if (r.sizes.empty()) return out;
  auto t0 = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(graphviz_mutex());

  static GVC_t* gvc = gvContext();   // one context for the process, used under the mutex
  if (!gvc) {
    out.error = "Graphviz could not start (gvContext failed)";
    grid_layout(r, out);
    return out;
  }
  agseterr(AGMAX);   // keep dot's warnings off the terminal; failures come back as codes
  Agraph_t* g = agopen(cs("lathe"), Agdirected, nullptr);
  agattr(g, AGRAPH, cs("rankdir"), cs("TB"));
  agattr(g, AGRAPH, cs("nodesep"), cs("0.3"));
  agattr(g, AGRAPH, cs("ranksep"), cs("0.4"));
  agattr(g, AGRAPH, cs("splines"), cs(r.sizes.size() > 2500 ? "line" : "spline"));
  if (r.sizes.size() > 1000) agattr(g, AGRAPH, cs("mclimit"), cs("0.2"));
  agattr(g, AGNODE, cs("shape"), cs("box"));
  agattr(g, AGNODE, cs("fixedsize"), cs("true"));
  agattr(g, AGNODE, cs("label"), cs(""));
  Agsym_t* sym_w = agattr(g, AGNODE, cs("width"), cs("1"));
  Agsym_t* sym_h = agattr(g, AGNODE, cs("height"), cs("0.5"));

  std::vector<Agnode_t*> nodes(r.sizes.size());
  char name[32], num[32];
  for (size_t i = 0; i < r.sizes.size(); ++i) {
    std::snprintf(name, sizeof name, "n%zu", i);
    nodes[i] = agnode(g, name, 1);
    std::snprintf(num, sizeof num, "%.4f", r.sizes[i].first / 72.0);
    agxset(nodes[i], sym_w, num);
    std::snprintf(num, sizeof num, "%.4f", r.sizes[i].second / 72.0);
    agxset(nodes[i], sym_h, num);
  }
  std::vector<Agedge_t*> edges(r.edges.size());
  for (size_t i = 0; i < r.edges.size(); ++i)
    edges[i] = agedge(g, nodes[r.edges[i].first], nodes[r.edges[i].second], nullptr, 1);

  if (gvLayout(gvc, g, "dot") != 0) {
    agclose(g);
    out.error = "Graphviz dot layout failed; boxes are shown in a grid";
    grid_layout(r, out);
    return out;
  }
  boxf bb = GD_bb(g);
  auto conv = [&](pointf p) { return Point{static_cast<float>(p.x - bb.LL.x), static_cast<float>(bb.UR.y - p.y)}; };
  out.width = static_cast<float>(bb.UR.x - bb.LL.x);
  out.height = static_cast<float>(bb.UR.y - bb.LL.y);
  out.centers.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) out.centers[i] = conv(ND_coord(nodes[i]));
  out.edges.reserve(edges.size());
  for (size_t i = 0; i < edges.size(); ++i) {
    LayoutEdge e;
    e.from = r.edges[i].first, e.to = r.edges[i].second;
    splines* spl = ED_spl(edges[i]);
    if (spl && spl->size > 0 && spl->list[0].size >= 4) {
      const bezier& bz = spl->list[0];
      for (int k = 0; k < bz.size; ++k) e.bezier.push_back(conv(bz.list[k]));
      if (bz.eflag) e.has_head = true, e.head = conv(bz.ep);
      if (bz.sflag) e.has_tail = true, e.tail = conv(bz.sp);
    } else {
      Point p = out.centers[e.from], q = out.centers[e.to];
      e.bezier = {p, p, q, q};
    }
    out.edges.push_back(std::move(e));
  }
  gvFreeLayout(gvc, g);
  agclose(g);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

//-----------------------------------------------------------------------------
// [SECTION] LayoutEngine: one worker, newest request wins, small cache
//-----------------------------------------------------------------------------

constexpr size_t kCacheSize = 12;

LayoutEngine::LayoutEngine(LayoutFn fn) : sh_(std::make_shared<Shared>()) {
  sh_->fn = fn;
  thread_ = std::thread(worker, sh_);
}

LayoutEngine::~LayoutEngine() {
  bool in_dot;
  {
    std::lock_guard<std::mutex> lock(sh_->mu);
    sh_->stop = true;
    in_dot = sh_->running;
  }
  sh_->cv.notify_all();
  if (in_dot) thread_.detach();   // it ends when dot returns; see Shared
  else thread_.join();
}

std::shared_ptr<const Layout> LayoutEngine::get(uint64_t key) {
  std::lock_guard<std::mutex> lock(sh_->mu);
  for (auto& l : sh_->cache)
    if (l->key == key) return l;
  return nullptr;
}

void LayoutEngine::request(LayoutRequest r) {
  std::lock_guard<std::mutex> lock(sh_->mu);
  if ((sh_->running && sh_->running_key == r.key) || (sh_->pending && sh_->pending->key == r.key)) return;
  for (auto& l : sh_->cache)
    if (l->key == r.key) return;
  sh_->pending = std::make_unique<LayoutRequest>(std::move(r));
  sh_->cv.notify_all();
}

void LayoutEngine::put(std::shared_ptr<const Layout> l) {
  std::lock_guard<std::mutex> lock(sh_->mu);
  sh_->cache.push_front(std::move(l));
  if (sh_->cache.size() > kCacheSize) sh_->cache.pop_back();
}

bool LayoutEngine::busy() {
  std::lock_guard<std::mutex> lock(sh_->mu);
  return sh_->running || sh_->pending;
}

void LayoutEngine::worker(std::shared_ptr<Shared> sh) {
  std::unique_lock<std::mutex> lock(sh->mu);
  for (;;) {
    sh->cv.wait(lock, [&] { return sh->stop || sh->pending; });
    if (sh->stop) return;
    std::unique_ptr<LayoutRequest> job = std::move(sh->pending);
    sh->running = true;
    sh->running_key = job->key;
    lock.unlock();
    auto result = std::make_shared<Layout>(sh->fn(*job));
    lock.lock();
    sh->running = false;
    sh->cache.push_front(std::move(result));
    if (sh->cache.size() > kCacheSize) sh->cache.pop_back();
  }
}

}  // namespace lathe::views
