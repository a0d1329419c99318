// graph_layout.h — laying out a display graph: nested_layout (layout_layered.cpp: each
// scope frame on its own, rows by rank, milliseconds) for drawings with scopes or many
// boxes or edges, and Graphviz `dot`, off the UI thread, for small flat ones.
//
// LayoutEngine owns one worker thread. request() hands it a copy of the box sizes and
// edges under a key (the display graph's key); get() returns the finished layout for a
// key, or nullptr while it is still running. Only the newest request waits: a request
// replaces one that has not started yet. Finished layouts are cached (a few, by key), so
// switching level or expansion back and forth is instant.
//
// Graphviz is not thread-safe: every call into it in this process goes through
// graphviz_mutex(). Coordinates are converted to y-down layout units (1 unit = 1 point =
// 1 px at zoom 1) with the origin at the top-left of the drawing.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace lathe::views {

struct DisplayGraph;

struct Point { float x = 0, y = 0; };

struct LayoutEdge {
  int from = 0, to = 0;
  std::vector<Point> bezier;        // cubic control points: 3k+1 of them
  bool has_head = false;            // arrowhead from bezier.back() to head
  Point head;
  bool has_tail = false;            // arrowhead at the start (edge reversed by dot)
  Point tail;
};

// An expanded scope's frame, laid out: its rectangle and the title bar's height.
struct FrameRect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  float title_h = 0;
};

struct Layout {
  uint64_t key = 0;
  std::vector<Point> centers;       // per box
  std::vector<FrameRect> frames;    // per DisplayGraph::frames entry
  std::vector<LayoutEdge> edges;
  float width = 0, height = 0;      // the drawing's extent
  float x0 = 0, y0 = 0;             // its top-left corner (0 from dot; a stable layout may grow past it)
  double seconds = 0;               // time dot (or layered_layout) took
  bool provisional = false;         // from layered_layout: shown while dot still runs
  bool layered = false;             // from nested_layout (not dot)
  std::string error;                // non-empty when the layout failed (boxes then sit in a grid)
};

// The input to one layout: what Graphviz needs and nothing else.
struct LayoutRequest {
  uint64_t key = 0;
  std::vector<std::pair<float, float>> sizes;   // box w, h
  std::vector<std::pair<int, int>> edges;
  // Nesting (empty = flat): per box the frame it sits in (-1 = top), per frame its parent
  // frame and the width of its title.
  std::vector<int> box_frame, frame_parent;
  std::vector<float> frame_title_w;
  float title_h = 20;
  // Stable expansion (nested_layout): per frame, the size of the box the scope was drawn as
  // while collapsed ({0, 0}: unknown). Each container is laid out with its frames at that
  // size, then opened up: the frame's row grows downward and its row neighbours step
  // aside, so the boxes outside a scope keep their places when it expands or collapses.
  std::vector<std::pair<float, float>> frame_base;
  // Per box, the key that orders the items of a container before the crossing sweeps
  // (empty: box order); a frame's key is the largest of its contents', so a scope's frame
  // and its collapsed box (keyed by its last node) sit at the same place in that order.
  std::vector<uint32_t> box_order;
};
// Box sizes, edges, nesting, and box_order from each box's rep (its last node's id).
LayoutRequest make_layout_request(const DisplayGraph& dg);

// Runs dot synchronously (takes graphviz_mutex). Never throws.
Layout run_dot_layout(const LayoutRequest& r);
// The layout of nested frames (layout_layered.cpp): each frame's contents are laid out
// on their own, in rows by rank (long edges routed through the rows between), innermost
// frames first, each then one box of its parent's layout. Milliseconds for thousands of
// boxes; never throws. Flat requests get the same rows-by-rank layout.
Layout nested_layout(const LayoutRequest& r);
// nested_layout marked provisional: shown for a large flat graph while dot lays it out in
// the background.
Layout layered_layout(const LayoutRequest& r);
// dot lays out flat graphs up to this many boxes and edges; larger ones and every graph
// with frames get nested_layout (dot took 290 s on a 265-kernel, 852-edge GPT-2).
constexpr size_t kDotMaxBoxes = 150, kDotMaxEdges = 300;
// Above this many boxes the view shows layered_layout first (dot takes ~0.3 s at 1,000
// boxes and ~6 s at 5,000 on a laptop core).
constexpr size_t kProvisionalLayoutBoxes = 2500;
std::mutex& graphviz_mutex();

class LayoutEngine {
 public:
  using LayoutFn = Layout (*)(const LayoutRequest&);
  explicit LayoutEngine(LayoutFn fn = run_dot_layout);
  ~LayoutEngine();
  LayoutEngine(const LayoutEngine&) = delete;
  LayoutEngine& operator=(const LayoutEngine&) = delete;

  // The cached layout for `key`, or nullptr (then call request()).
  std::shared_ptr<const Layout> get(uint64_t key);
  void request(LayoutRequest r);
  void put(std::shared_ptr<const Layout> l);   // caches a layout made elsewhere (nested_layout)
  bool busy();                      // a layout is queued or running

 private:
  // Shared with the worker, which may outlive the engine: dot cannot be interrupted, and
  // closing the window must not wait minutes for a huge graph's layout, so the destructor
  // detaches a worker still inside dot and the worker drops its result.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    bool running = false;
    std::unique_ptr<LayoutRequest> pending;
    uint64_t running_key = 0;
    std::deque<std::shared_ptr<const Layout>> cache;   // newest at the front
    LayoutFn fn = nullptr;
  };
  static void worker(std::shared_ptr<Shared> sh);
  std::shared_ptr<Shared> sh_;
  std::thread thread_;
};

}  // namespace lathe::views
