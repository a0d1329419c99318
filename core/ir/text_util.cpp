// text_util.cpp — see text_util.h.
#include "core/ir/text_util.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <vector>

#include "core/ir/ops.h"

namespace lathe {

size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min<size_t>({row[j] + 1, row[j - 1] + 1, diag + (same ? 0u : 1u)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest_op_name(std::string_view name, size_t max_distance) {
  std::string best;
  size_t best_d = max_distance;
  for (int i = 0; i < kNumOps; ++i) {
    std::string_view cand = op_name(static_cast<Op>(i));
    size_t d = edit_distance(name, cand);
    if (d < best_d) { best_d = d; best = std::string(cand); }
  }
  return best;
}

}  // namespace lathe
