// text_parser.h — the .lathe parser's class, shared by text_parse.cpp (lines, statements,
// types) and text_parse_attrs.cpp (the `{key=value}` attributes and tensor literals). Internal:
// users call parse_graph (text.h). The grammar is written at the top of text_parse.cpp.
#pragma once
#include <cctype>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/ir/diag.h"
#include "core/ir/graph.h"
#include "core/ir/sidecar.h"

namespace lathe::text_detail {


constexpr double kMaxMagnitude = 4.6e18;  // ~2^62: products/sums of dims stay in int64
constexpr size_t kMaxExprBytes = 256;
constexpr int64_t kMaxSmallInt = 2147483647;  // axes, steps, ids, extern ints

struct Sym {
  SymInt value;
  double bound;  // magnitude bound on every constant canonicalization can fold out of it
};

class Parser {
 public:
  Parser(std::string_view text, std::string file, SidecarReader* sidecar = nullptr)
      : text_(text), file_(std::move(file)), sidecar_(sidecar) {}
  Graph parse();

 private:
  std::string_view text_;
  std::string file_;
  SidecarReader* sidecar_;
  int64_t cur_id_ = -1;    // the node being parsed (for messages)
  std::vector<std::string_view> lines_;
  size_t ln_ = 0;          // current line (0-based)
  std::string_view cur_;   // its text
  size_t pos_ = 0;         // column (0-based) in cur_

  std::unordered_map<int64_t, size_t> first_definition_;  // pre-scan: id -> line
  std::unordered_map<int64_t, NodeRef> nodes_;
  std::unordered_map<int64_t, size_t> defined_at_;
  std::unordered_map<NodeRef, size_t> line_of_;
  std::unordered_map<uint32_t, int64_t> text_id_;  // store id -> id in this file
  std::vector<NodeRef> inputs_;
  std::unordered_map<std::string, size_t> input_names_, output_names_;
  std::vector<std::pair<std::string, NodeRef>> outputs_;

  // ---- errors
  [[noreturn]] void fail_at(size_t line, size_t col0, const std::string& msg) const {
    Diagnostic d;
    d.file = file_;
    d.line = static_cast<int>(line + 1);
    d.col = static_cast<int>(col0 + 1);
    d.message = msg;
    if (line < lines_.size()) d.source_line = std::string(lines_[line]);
    throw UserError(d);
  }
  [[noreturn]] void fail(size_t col0, const std::string& msg) const { fail_at(ln_, col0, msg); }
  std::string with_text_ids(const std::string& msg) const;

  // ---- lexing within the current line
  void set_line(size_t i) { ln_ = i; cur_ = lines_[i]; pos_ = 0; }
  void skip_space() {
    while (pos_ < cur_.size() && (cur_[pos_] == ' ' || cur_[pos_] == '\t')) ++pos_;
    if (pos_ < cur_.size() && cur_[pos_] == '#') pos_ = cur_.size();
  }
  bool at_end() { skip_space(); return pos_ >= cur_.size(); }
  bool peek(char c) { skip_space(); return pos_ < cur_.size() && cur_[pos_] == c; }
  bool accept(char c) { if (!peek(c)) return false; ++pos_; return true; }
  void expect(char c, const std::string& what) {
    if (!accept(c)) fail(pos_, "expected " + what + ", found " + found());
  }
  void expect_end() {
    if (!at_end()) fail(pos_, "unexpected " + found() + " at the end of the statement");
  }
  std::string found() {
    skip_space();
    if (pos_ >= cur_.size()) return "the end of the line";
    size_t e = pos_ + 1;
    while (e < cur_.size() && e < pos_ + 24 && !std::isspace(static_cast<unsigned char>(cur_[e]))) ++e;
    return "'" + std::string(cur_.substr(pos_, e - pos_)) + "'";
  }
  bool significant(size_t i) { set_line(i); return !at_end(); }

  std::string_view word();
  std::string parse_string();
  std::string parse_name(const std::string& what);
  int64_t parse_int(int64_t lo, int64_t hi, const std::string& what);
  int64_t parse_id();
  NodeRef parse_use();
  Sym parse_sym(bool in_list);
  std::vector<Sym> parse_sym_list();
  std::pair<DType, Shape> parse_type();
  Provenance parse_provenance();

  void check_encoding();
  void statement();
  void input_statement();
  void node_statement();
  void output_statement();
  Attrs parse_attrs(Op op, DType dt, const Shape& shape, size_t brace_col);
  void parse_const_value(Attrs& a, DType dt);
  void parse_const_data(Attrs& a, DType dt, const Shape& shape, size_t col);
  void load_bin(Attrs& a, DType dt, const Shape& shape, size_t col, uint64_t offset, uint64_t nbytes, uint64_t check);
  double parse_float_token(std::string_view tok, size_t col, DType dt);
  int64_t parse_int_token(std::string_view tok, size_t col, DType dt);
  NodeRef add_node(int64_t id, Op op, DType dt, Shape shape, std::vector<NodeRef> in, Attrs a, Provenance p,
                   size_t col);
};

}  // namespace lathe::text_detail
