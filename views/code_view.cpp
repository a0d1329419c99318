// code_view.cpp — the read-only code viewer (see code_view.h): a line index, a small
// per-line tokenizer and drawing with the monospace font through the window's draw list.
#include "views/code_view.h"

#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <cctype>
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_set>

namespace lathe::views {

namespace {

constexpr ImU32 kKeyword = IM_COL32(198, 146, 234, 255);
constexpr ImU32 kType = IM_COL32(96, 208, 188, 255);
constexpr ImU32 kNumber = IM_COL32(190, 214, 150, 255);
constexpr ImU32 kString = IM_COL32(226, 160, 124, 255);
constexpr ImU32 kComment = IM_COL32(118, 160, 98, 255);
constexpr ImU32 kValue = IM_COL32(140, 200, 255, 255);
constexpr ImU32 kLabel = IM_COL32(250, 210, 110, 255);
constexpr ImU32 kPlain = IM_COL32(220, 224, 232, 255);
constexpr ImU32 kLineNo = IM_COL32(110, 116, 130, 255);

const std::unordered_set<std::string_view>& keywords(CodeLang l) {
  static const std::unordered_set<std::string_view> c = {
      "for", "if", "else", "while", "do", "return", "break", "continue", "static", "inline", "const", "restrict",
      "__restrict", "__restrict__", "extern", "struct", "typedef", "sizeof", "switch", "case", "default", "goto",
      "__global__", "__device__", "__shared__", "__syncthreads", "pragma", "omp", "parallel", "simd", "include",
      "define", "void"};
  static const std::unordered_set<std::string_view> llvm = {
      "define", "declare", "ret", "br", "label", "phi", "load", "store", "getelementptr", "inbounds", "call", "alloca",
      "icmp", "fcmp", "add", "sub", "mul", "fadd", "fsub", "fmul", "fdiv", "sdiv", "srem", "udiv", "and", "or", "xor",
      "shl", "select", "sext", "zext", "trunc", "sitofp", "fptosi", "bitcast", "fpext", "fptrunc", "nsw", "nuw",
      "fast", "align", "noalias", "nocapture", "readonly", "writeonly", "to", "tail", "insertelement",
      "extractelement", "shufflevector", "attributes", "private", "internal", "dso_local", "global", "constant",
      "slt", "sgt", "sle", "sge", "eq", "ne", "olt", "ogt", "ole", "oge", "une", "uno", "ult", "ugt", "entry"};
  static const std::unordered_set<std::string_view> loop = {
      "for", "in", "if", "else", "parallel", "vector", "unroll", "serial", "reduce", "let", "store", "load",
      "kernel", "func", "buffer", "acc", "where", "max", "min", "select", "tile", "split", "vectorize", "prefetch"};
  static const std::unordered_set<std::string_view> none;
  return l == CodeLang::C ? c : l == CodeLang::LLVM ? llvm : l == CodeLang::Loop ? loop : none;
}

bool is_type(std::string_view w) {
  static const std::unordered_set<std::string_view> t = {
      "float", "double", "int", "long", "char", "short", "unsigned", "signed", "bool", "half", "int8_t", "int16_t",
      "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t", "ptr", "i1", "i8", "i16",
      "i32", "i64", "f16", "f32", "f64", "bf16", "u8", "u32", "u64", "__m256", "__m512", "float4"};
  if (t.count(w)) return true;
  return w.size() > 1 && w[0] == '<' && std::isdigit(static_cast<unsigned char>(w[1]));
}

struct Token {
  size_t begin, end;
  ImU32 col;
};

// Splits one line into coloured runs (whitespace is left to the gaps between tokens).
void tokenize(std::string_view line, CodeLang lang, std::vector<Token>& out) {
  out.clear();
  const auto& kw = keywords(lang);
  size_t i = 0, n = line.size();
  bool first_word = true;
  while (i < n) {
    unsigned char ch = static_cast<unsigned char>(line[i]);
    if (std::isspace(ch)) { ++i; continue; }
    size_t b = i;
    // Comments run to the end of the line.
    bool comment = (lang == CodeLang::C || lang == CodeLang::Loop) ? line.compare(i, 2, "//") == 0
                   : lang == CodeLang::LLVM ? ch == ';'
                   : lang == CodeLang::Asm ? (ch == '#' || ch == ';' || line.compare(i, 2, "//") == 0)
                   : false;
    if (lang == CodeLang::Loop && ch == '#') comment = true;
    if (lang == CodeLang::C && line.compare(i, 2, "/*") == 0) {
      size_t e = line.find("*/", i + 2);
      i = e == std::string_view::npos ? n : e + 2;
      out.push_back({b, i, kComment});
      continue;
    }
    if (comment) { out.push_back({b, n, kComment}); break; }
    if (ch == '"') {
      for (++i; i < n && line[i] != '"'; ++i)
        if (line[i] == '\\') ++i;
      i = std::min(n, i + 1);
      out.push_back({b, i, kString});
      continue;
    }
    if (std::isdigit(ch) || (ch == '-' && i + 1 < n && std::isdigit(static_cast<unsigned char>(line[i + 1])) &&
                             (i == 0 || !std::isalnum(static_cast<unsigned char>(line[i - 1]))))) {
      ++i;
      while (i < n && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '.' || line[i] == '_')) ++i;
      out.push_back({b, i, kNumber});
      continue;
    }
    if (std::isalpha(ch) || ch == '_' || ch == '%' || ch == '@' || ch == '.' || ch == '$') {
      ++i;
      while (i < n && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == '.' ||
                       line[i] == '$'))
        ++i;
      std::string_view w = line.substr(b, i - b);
      ImU32 col = kPlain;
      bool label = i < n && line[i] == ':' && (lang == CodeLang::Asm || lang == CodeLang::LLVM) && first_word;
      if (label) col = kLabel, ++i;
      else if (ch == '%' || ch == '@' || ch == '$') col = kValue;
      else if (ch == '.' && lang == CodeLang::Asm) col = kType;   // assembler directives
      else if (lang == CodeLang::Asm && first_word) col = kKeyword;   // the mnemonic
      else if (kw.count(w)) col = kKeyword;
      else if (is_type(w)) col = kType;
      out.push_back({b, i, col});
      first_word = false;
      continue;
    }
    ++i;   // punctuation: one character
    out.push_back({b, i, kPlain});
    first_word = false;
  }
}

}  // namespace

CodeLang source_lang(const std::string& backend) {
  if (backend == "c" || backend == "cuda") return CodeLang::C;
  if (backend == "llvm") return CodeLang::LLVM;
  return CodeLang::Plain;
}

void CodeView::index(const std::string& text) {
  size_t h = std::hash<std::string_view>()(std::string_view(text).substr(0, 4096));
  if (indexed_ == &text && indexed_size_ == text.size() && indexed_hash_ == h) return;
  indexed_ = &text, indexed_size_ = text.size(), indexed_hash_ = h;
  starts_.assign(1, 0);
  longest_ = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') {
      longest_ = std::max(longest_, i - starts_.back());
      starts_.push_back(i + 1);
    }
  if (starts_.back() < text.size()) {
    longest_ = std::max(longest_, text.size() - starts_.back());
    starts_.push_back(text.size() + 1);
  }
}

void CodeView::draw(const char* id, const std::string& text, CodeLang lang, const Fonts& fonts) {
  index(text);
  size_t lines = starts_.size() - 1;
  if (ImGui::SmallButton("Copy")) ImGui::SetClipboardText(text.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("%zu lines", lines);
  ImGui::PushFont(fonts.mono);
  // The exact advance (ImGui::CalcTextSize rounds widths up to whole pixels).
  const float char_w = ImGui::GetFont()->CalcTextSizeA(ImGui::GetFontSize(), FLT_MAX, 0, "MMMMMMMMMMMMMMMMMMMM").x / 20;
  const float line_h = ImGui::GetTextLineHeight() + 1.0f;
  const int digits = static_cast<int>(std::to_string(std::max<size_t>(lines, 1)).size());
  const float gutter = char_w * (digits + 1.5f);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, IM_COL32(20, 22, 27, 255));
  ImGui::BeginChild(id, ImVec2(0, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(0, 0));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  std::vector<Token> tokens;
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(lines), line_h);
  while (clipper.Step()) {
    for (int l = clipper.DisplayStart; l < clipper.DisplayEnd; ++l) {
      ImVec2 p = ImGui::GetCursorScreenPos();
      std::string_view line(text.data() + starts_[l], starts_[l + 1] - 1 - starts_[l]);
      char num[16];
      std::snprintf(num, sizeof num, "%*d", digits, l + 1);
      dl->AddText(p, kLineNo, num);
      tokenize(line, lang, tokens);
      size_t col = 0, at = 0;   // tabs count as 4 columns when placing tokens
      for (const Token& t : tokens) {
        for (; at < t.begin; ++at) col += line[at] == '\t' ? 4 - col % 4 : 1;
        dl->AddText(ImVec2(p.x + gutter + col * char_w, p.y), t.col, line.data() + t.begin, line.data() + t.end);
      }
      ImGui::Dummy(ImVec2(gutter + (longest_ + 4) * char_w, line_h));
    }
  }
  clipper.End();
  ImGui::PopStyleVar();
  ImGui::EndChild();
  ImGui::PopStyleColor();
  ImGui::PopFont();
}

}  // namespace lathe::views
