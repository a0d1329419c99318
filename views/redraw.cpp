// redraw.cpp — partial redraw of the graph panel (see redraw.h).
#include "views/redraw.h"

#include <GL/gl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace lathe::views {

namespace {

uint64_t mix(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

uint64_t signature(const ImDrawList* d) {
  uint64_t h = 1469598103934665603ull;
  h = mix(h, d->VtxBuffer.Data, d->VtxBuffer.Size * sizeof(ImDrawVert));
  h = mix(h, d->IdxBuffer.Data, d->IdxBuffer.Size * sizeof(ImDrawIdx));
  for (const ImDrawCmd& c : d->CmdBuffer) {
    h = mix(h, &c.ClipRect, sizeof c.ClipRect);
    h = mix(h, &c.TextureId, sizeof c.TextureId);
    h = mix(h, &c.ElemCount, sizeof c.ElemCount);
    h = mix(h, &c.IdxOffset, sizeof c.IdxOffset);
    h = mix(h, &c.VtxOffset, sizeof c.VtxOffset);
  }
  return h;
}

constexpr int kProbe = 48;   // the block read back: the menu bar's top-left (text on it)

}  // namespace

ClearRect intersect(ClearRect a, ClearRect b) {
  return {std::max(a.x0, b.x0), std::max(a.y0, b.y0), std::min(a.x1, b.x1), std::min(a.y1, b.y1)};
}

std::vector<ClearRect> subtract(const std::vector<ClearRect>& rects, ClearRect cut) {
  std::vector<ClearRect> out;
  for (const ClearRect& r : rects) {
    if (r.empty()) continue;
    ClearRect c = intersect(r, cut);
    if (c.empty()) {
      out.push_back(r);
      continue;
    }
    // Above and below the cut (full width), then left and right of it (its rows only).
    ClearRect parts[4] = {{r.x0, r.y0, r.x1, c.y0}, {r.x0, c.y1, r.x1, r.y1}, {r.x0, c.y0, c.x0, c.y1}, {c.x1, c.y0, r.x1, c.y1}};
    for (const ClearRect& p : parts)
      if (!p.empty()) out.push_back(p);
  }
  return out;
}

ImVec4 PartialRedraw::plan(ImDrawData* dd, ImVec2 a, ImVec2 z, const char* owner, int fb_w, int fb_h) {
  ImVec4 full(0, 0, dd->DisplaySize.x, dd->DisplaySize.y);
  std::vector<uint64_t> sigs;
  size_t n = std::strlen(owner);
  for (int l = 0; l < dd->CmdListsCount; ++l) {
    const ImDrawList* d = dd->CmdLists[l];
    if (d->_OwnerName && std::strncmp(d->_OwnerName, owner, n) == 0) continue;
    sigs.push_back(signature(d));
  }
  bool same = enabled_ && !invalid_ && fb_w == fb_w_ && fb_h == fb_h_ && sigs == sigs_ && z.x > a.x && z.y > a.y &&
              dd->DisplayPos.x == 0 && dd->DisplayPos.y == 0;
  sigs_ = std::move(sigs);
  invalid_ = false;
  fb_w_ = fb_w, fb_h_ = fb_h;
  last_partial_ = same;
  return same ? ImVec4(a.x, a.y, z.x, z.y) : full;
}

void PartialRedraw::track(ImDrawData* dd, ImVec2 a, ImVec2 z, const char* owner) {
  tiles_min_ = a, tiles_max_ = z;
  tiles_w_ = std::max(0, static_cast<int>(std::ceil((z.x - a.x) / kTile)));
  tiles_h_ = std::max(0, static_cast<int>(std::ceil((z.y - a.y) / kTile)));
  tiles_.assign(static_cast<size_t>(tiles_w_) * tiles_h_, 0);
  if (tiles_.empty()) return;
  size_t n = std::strlen(owner);
  for (int l = 0; l < dd->CmdListsCount; ++l) {
    const ImDrawList* d = dd->CmdLists[l];
    if (!d->_OwnerName || std::strncmp(d->_OwnerName, owner, n) != 0) continue;
    for (const ImDrawCmd& c : d->CmdBuffer) {
      if (c.UserCallback) continue;
      float cx0 = std::max(c.ClipRect.x, a.x), cy0 = std::max(c.ClipRect.y, a.y);
      float cx1 = std::min(c.ClipRect.z, z.x), cy1 = std::min(c.ClipRect.w, z.y);
      if (cx1 <= cx0 || cy1 <= cy0) continue;
      const ImDrawIdx* idx = d->IdxBuffer.Data + c.IdxOffset;
      const ImDrawVert* vtx = d->VtxBuffer.Data + c.VtxOffset;
      for (unsigned t = 0; t + 2 < c.ElemCount; t += 3) {
        const ImVec2 &p0 = vtx[idx[t]].pos, &p1 = vtx[idx[t + 1]].pos, &p2 = vtx[idx[t + 2]].pos;
        float x0 = std::max(std::min({p0.x, p1.x, p2.x}), cx0), x1 = std::min(std::max({p0.x, p1.x, p2.x}), cx1);
        float y0 = std::max(std::min({p0.y, p1.y, p2.y}), cy0), y1 = std::min(std::max({p0.y, p1.y, p2.y}), cy1);
        if (x1 <= x0 || y1 <= y0) continue;
        int tx0 = static_cast<int>((x0 - a.x) / kTile), tx1 = std::min(tiles_w_ - 1, static_cast<int>((x1 - a.x) / kTile));
        int ty0 = static_cast<int>((y0 - a.y) / kTile), ty1 = std::min(tiles_h_ - 1, static_cast<int>((y1 - a.y) / kTile));
        for (int ty = ty0; ty <= ty1; ++ty) std::memset(&tiles_[static_cast<size_t>(ty) * tiles_w_ + tx0], 1, tx1 - tx0 + 1);
      }
    }
  }
}

std::vector<ClearRect> PartialRedraw::canvas_clears(ImVec2 a, ImVec2 z, ImVec2 scale) const {
  auto px = [&](float x0, float y0, float x1, float y1) {
    return ClearRect{static_cast<int>(std::floor(x0 * scale.x)), static_cast<int>(std::floor(y0 * scale.y)),
                     static_cast<int>(std::ceil(x1 * scale.x)), static_cast<int>(std::ceil(y1 * scale.y))};
  };
  bool same = last_partial_ && a.x == tiles_min_.x && a.y == tiles_min_.y && z.x == tiles_max_.x && z.y == tiles_max_.y &&
              !tiles_.empty();
  if (!same) return {px(a.x, a.y, z.x, z.y)};
  std::vector<ClearRect> out;   // runs of drawn tiles along each row, merged with the run above when they match
  for (int ty = 0; ty < tiles_h_; ++ty) {
    for (int tx = 0; tx < tiles_w_;) {
      if (!tiles_[static_cast<size_t>(ty) * tiles_w_ + tx]) {
        ++tx;
        continue;
      }
      int end = tx;
      while (end < tiles_w_ && tiles_[static_cast<size_t>(ty) * tiles_w_ + end]) ++end;
      ClearRect r = intersect(px(a.x + tx * kTile, a.y + ty * kTile, a.x + end * kTile, a.y + (ty + 1) * kTile),
                              px(a.x, a.y, z.x, z.y));
      bool merged = false;
      for (auto it = out.rbegin(); it != out.rend() && it->y1 >= r.y0; ++it)
        if (it->y1 == r.y0 && it->x0 == r.x0 && it->x1 == r.x1) {
          it->y1 = r.y1;
          merged = true;
          break;
        }
      if (!merged) out.push_back(r);
      tx = end;
    }
  }
  return out;
}

void PartialRedraw::clip(ImDrawData* dd, ImVec4 r) {
  for (int l = 0; l < dd->CmdListsCount; ++l)
    for (ImDrawCmd& c : dd->CmdLists[l]->CmdBuffer) {
      c.ClipRect.x = std::max(c.ClipRect.x, r.x), c.ClipRect.y = std::max(c.ClipRect.y, r.y);
      c.ClipRect.z = std::min(c.ClipRect.z, r.z), c.ClipRect.w = std::min(c.ClipRect.w, r.w);
    }
}

void PartialRedraw::probe_before_swap(int fb_w, int fb_h) {
  if (probe_ != 0 || fb_w < kProbe || fb_h < kProbe) return;
  const char* off = std::getenv("LATHE_GUI_FULL_REDRAW");
  if (off && *off && std::strcmp(off, "0") != 0) {
    probe_ = 2;
    return;
  }
  before_.resize(kProbe * kProbe * 4);
  glReadPixels(0, fb_h - kProbe, kProbe, kProbe, GL_RGBA, GL_UNSIGNED_BYTE, before_.data());
  probe_ = 1;
}

void PartialRedraw::probe_after_swap(int fb_w, int fb_h) {
  if (probe_ != 1) return;
  probe_ = 2;
  std::vector<unsigned char> after(kProbe * kProbe * 4);
  glReadPixels(0, fb_h - kProbe, kProbe, kProbe, GL_RGBA, GL_UNSIGNED_BYTE, after.data());
  // Kept, and not one flat colour (a buffer cleared to the same colour proves nothing).
  bool flat = true;
  for (size_t i = 4; i < before_.size() && flat; i += 4) flat = std::memcmp(&before_[i], &before_[0], 4) == 0;
  enabled_ = after == before_ && !flat && fb_w == fb_w_ && fb_h == fb_h_;
}

}  // namespace lathe::views
