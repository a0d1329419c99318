// code_view.h — a read-only code viewer: line numbers, simple syntax highlighting
// (keywords, types, numbers, strings, comments, %values / registers, labels) for loop IR,
// C / CUDA C, LLVM IR and assembly, only the visible lines drawn (ImGuiListClipper), a
// horizontal scrollbar for long lines and a Copy button.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "views/theme.h"

namespace lathe::views {

enum class CodeLang { Loop, C, LLVM, Asm, Plain };

// The language a backend's source is written in ("c" -> C, "llvm" -> LLVM IR, …).
CodeLang source_lang(const std::string& backend);

class CodeView {
 public:
  // Draws `text` filling the remaining space of the current window.
  void draw(const char* id, const std::string& text, CodeLang lang, const Fonts& fonts);

 private:
  void index(const std::string& text);
  const std::string* indexed_ = nullptr;   // the text the line index is for
  size_t indexed_size_ = 0, indexed_hash_ = 0;
  std::vector<size_t> starts_;             // line start offsets (+ one past the end)
  size_t longest_ = 0;                     // characters in the longest line
};

}  // namespace lathe::views
