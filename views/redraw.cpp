// redraw.cpp — partial redraw of the graph panel (see redraw.h).
#include "views/redraw.h"

#include <GL/gl.h>

#include <algorithm>
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

ImVec4 PartialRedraw::plan(ImDrawData* dd, ImVec2 a, ImVec2 z, const char* owner, int fb_w, int fb_h) {
  ImVec4 full(0, 0, dd->DisplaySize.x, dd->DisplaySize.y);
  std::vector<uint64_t> sigs;
  size_t n = std::strlen(owner);
  for (int l = 0; l < dd->CmdListsCount; ++l) {
    const ImDrawList* d = dd->CmdLists[l];
    if (d->_OwnerName && std::strncmp(d->_OwnerName, owner, n) == 0) continue;
    sigs.push_back(signature(d));
  }
  bool same = enabled_ && fb_w == fb_w_ && fb_h == fb_h_ && sigs == sigs_ && z.x > a.x && z.y > a.y &&
              dd->DisplayPos.x == 0 && dd->DisplayPos.y == 0;
  sigs_ = std::move(sigs);
  fb_w_ = fb_w, fb_h_ = fb_h;
  last_partial_ = same;
  return same ? ImVec4(a.x, a.y, z.x, z.y) : full;
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
