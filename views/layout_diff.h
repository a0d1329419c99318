// layout_diff.h — keeping the drawing still across a rewrite step.
//
// After a step most of the graph is the same nodes (they are hash-consed) or rebuilt
// copies of them (AppState::VersionDiff::was). Laying the new version out afresh with dot
// would move everything; instead layout_step() keeps every surviving box at its old
// centre, puts each new box near its neighbours (or beside the ghost of the node it
// replaced) in a free spot, keeps the old splines of edges between boxes that stayed, and draws short
// curves for the rest. Boxes of the old version that left become ghosts: drawn faded at
// their old places with their old edges, so the step reads as a before/after picture.
//
// When too much changed (a long Run) the old places mean little: `ok` is false and the
// caller lays the graph out afresh (no ghosts). The toolbar's Re-layout does that on demand.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "views/app_state.h"
#include "views/display_graph.h"
#include "views/graph_layout.h"

namespace lathe::views {

struct Ghost {
  std::vector<std::string> lines;   // the old box's label
  Point center;
  float w = 0, h = 0;
};

struct StepLayout {
  bool ok = false;                        // false: too much changed; use a fresh dot layout
  std::shared_ptr<const Layout> layout;   // for the new display graph (same key)
  std::vector<Ghost> ghosts;
  std::vector<std::vector<Point>> ghost_edges;   // old splines to or from a ghost (cubic control points)
  std::vector<char> added;                // per new box: it is new in this step (marked)
  size_t kept = 0, placed = 0;            // boxes at their old centre / placed anew
};

// Boxes present in both versions whose centres differ (by more than a point).
size_t count_moved(const DisplayGraph& before, const Layout& before_layout, const DisplayGraph& after,
                   const Layout& after_layout, const AppState::VersionDiff& diff);

// The layout of `after` that keeps `before`'s places (`diff` is AppState::diff between them).
StepLayout layout_step(const DisplayGraph& before, const Layout& before_layout, const DisplayGraph& after,
                       const AppState::VersionDiff& diff);

}  // namespace lathe::views
