// text_parse.cpp — the .lathe parser: parse_graph(text, filename) → Graph.
//
// Grammar (one statement per line; `#` starts a comment that runs to the end of the line;
// blanks are spaces and tabs; the file is UTF-8 without control characters but tab):
//
//   file      := header? 'graph' '{' NL statement* '}' NL?        -- nothing after '}'
//   header    := '# lathe' VERSION                                 -- optional; VERSION = 1
//   statement := input | node | output
//   input     := 'in' ID NAME ':' type prov?                       -- a graph input, in order
//   node      := ID '=' OP ( '(' (ID (',' ID)*)? ')' )? attrs? ':' type prov?
//   output    := 'out' NAME '=' ID
//   type      := DTYPE '[' (dim (',' dim)*)? ']'                   -- f32[B, 784], i64[]
//   dim       := a SymInt expression: 784, B, B*784, (T+1)/2, max(B,1)
//   attrs     := '{' (KEY '=' value)* '}'                          -- the keys an op takes:
//       Input  name=STRING              Const  value=NUMBER | data=[NUMBER, …] (row-major)
//                                           | bin=[OFFSET, NBYTES] check=HEX  (bytes in the sidecar)
//       Index, Take  axis=INT           Reduce op=add|max|mul axes=[INT, …]
//       View   strides=[dim, …] offset=dim mask=[[lo, hi], …]   (offset 0, no mask default)
//       Extern name=STRING ints=[INT, …]
//   prov      := '@' STRING? ('step=' INT)? 'backward'?          -- provenance
//   ID        := '%' DIGITS            NAME := IDENT | STRING     IDENT := [A-Za-z_][A-Za-z0-9_.]*
//   STRING    := '"' (char | '\"' | '\\' | '\xHH')* '"'
//   NUMBER    := an integer, a decimal float, nan, inf, -inf, true, false
//
// Ids need not be dense, but a node must be defined before it is used (so a cycle shows up
// as a use before definition). Every node goes through prim::check_node (the builders'
// checks) before make_node, so whatever parses also verifies; the whole graph then goes
// through verify(). Every error is a UserError at file:line:col with the source line.
// Limits that keep hostile input harmless: symbolic values stay below 2^62 (so nothing
// downstream overflows), expressions are at most 256 bytes, tensor literals are counted
// against their declared shape before anything is allocated.
//
// bin=[OFFSET, NBYTES]: the tensor's row-major bytes lie at OFFSET in the binary sidecar
// FILE.bin (sidecar.h), which parse_graph(text, file, sidecar_path) maps; check=HEX must
// match them. Without a sidecar path (text from memory) such a Const is an error.
//
// The Parser class is declared in text_parser.h; its attribute and literal parsing is in
// text_parse_attrs.cpp.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/ir/sidecar.h"
#include "core/ir/text.h"
#include "core/ir/text_util.h"
#include "core/ir/verify.h"
#include "core/runtime/host_tensor.h"

#include "core/ir/text_parser.h"

namespace lathe {
namespace text_detail {
namespace {

std::string op_suggestion(std::string_view name) {
  std::string best = closest_op_name(name, name.size() <= 3 ? 2 : 3);
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

// Restores the thread's provenance context on exit; the parser wants none of it.
struct ProvenanceContextReset {
  ProvenanceContext saved = current_provenance();
  ProvenanceContextReset() { current_provenance() = ProvenanceContext{}; }
  ~ProvenanceContextReset() { current_provenance() = saved; }
};

}  // namespace

// ---- encoding: valid UTF-8, no control characters but tab (and CR before LF)
void Parser::check_encoding() {
  size_t line = 0, line_start = 0;
  for (size_t i = 0; i < text_.size();) {
    unsigned char c = static_cast<unsigned char>(text_[i]);
    std::string problem;
    if (c == '\n') { ++line; line_start = ++i; continue; }
    if (c == '\r' && i + 1 < text_.size() && text_[i + 1] == '\n') { ++i; continue; }
    if (c == '\t') { ++i; continue; }
    if (c < 0x20 || c == 0x7F) {
      problem = "control character 0x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15] +
                " is not allowed (only tab and newline are)";
    } else if (size_t n = utf8_sequence_length(text_, i)) {
      i += n;
      continue;
    } else {
      problem = "invalid UTF-8 byte 0x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15] +
                " (.lathe files are UTF-8 text)";
    }
    size_t end = text_.find('\n', line_start);
    std::string shown(text_.substr(line_start, end == std::string_view::npos ? text_.npos : end - line_start));
    for (char& ch : shown)
      if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7F) ch = '?';
    Diagnostic d{problem, file_, static_cast<int>(line + 1), static_cast<int>(i - line_start + 1), -1, shown};
    throw UserError(d);
  }
}

// ---- tokens
std::string_view Parser::word() {
  skip_space();
  size_t b = pos_;
  if (pos_ < cur_.size() && (std::isalpha(static_cast<unsigned char>(cur_[pos_])) || cur_[pos_] == '_'))
    while (pos_ < cur_.size() && (std::isalnum(static_cast<unsigned char>(cur_[pos_])) || cur_[pos_] == '_' ||
                                  cur_[pos_] == '.'))
      ++pos_;
  return cur_.substr(b, pos_ - b);
}

// STRING := '"' (char | '\"' | '\\' | '\xHH')* '"'
std::string Parser::parse_string() {
  size_t start = pos_;
  expect('"', "a string in double quotes");
  std::string r;
  while (pos_ < cur_.size() && cur_[pos_] != '"') {
    char c = cur_[pos_++];
    if (c != '\\') { r += c; continue; }
    if (pos_ >= cur_.size()) break;
    char e = cur_[pos_++];
    if (e == '"' || e == '\\') { r += e; continue; }
    auto hex = [](char h) { return std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 32) - 'a' + 10; };
    if (e == 'x' && pos_ + 1 < cur_.size() && std::isxdigit(static_cast<unsigned char>(cur_[pos_])) &&
        std::isxdigit(static_cast<unsigned char>(cur_[pos_ + 1]))) {
      r += static_cast<char>(hex(cur_[pos_]) * 16 + hex(cur_[pos_ + 1]));
      pos_ += 2;
      continue;
    }
    fail(pos_ - 2, "unknown escape in string; use \\\", \\\\ or \\xHH");
  }
  if (pos_ >= cur_.size()) fail(start, "unterminated string (the closing '\"' is missing)");
  ++pos_;
  return r;
}

std::string Parser::parse_name(const std::string& what) {
  if (peek('"')) return parse_string();
  std::string_view w = word();
  if (w.empty()) fail(pos_, "expected " + what + " (a name or a \"quoted string\"), found " + found());
  return std::string(w);
}

int64_t Parser::parse_int(int64_t lo, int64_t hi, const std::string& what) {
  skip_space();
  size_t b = pos_;
  if (pos_ < cur_.size() && (cur_[pos_] == '-' || cur_[pos_] == '+')) ++pos_;
  while (pos_ < cur_.size() && std::isdigit(static_cast<unsigned char>(cur_[pos_]))) ++pos_;
  std::string_view tok = cur_.substr(b, pos_ - b);
  if (!tok.empty() && tok[0] == '+') tok.remove_prefix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (tok.empty() || ec == std::errc::invalid_argument || p != tok.data() + tok.size())
    fail(b, "expected " + what + " (an integer), found " + (pos_ = b, found()));
  if (ec == std::errc::result_out_of_range || v < lo || v > hi)
    fail(b, what + " " + std::string(tok) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

// ID := '%' DIGITS
int64_t Parser::parse_id() {
  skip_space();
  if (!accept('%')) fail(pos_, "expected a node id like %3, found " + found());
  if (pos_ >= cur_.size() || !std::isdigit(static_cast<unsigned char>(cur_[pos_])))
    fail(pos_, "expected digits after '%' in a node id");
  return parse_int(0, kMaxSmallInt, "node id");
}

NodeRef Parser::parse_use() {
  skip_space();
  size_t col = pos_;
  int64_t id = parse_id();
  auto it = nodes_.find(id);
  if (it != nodes_.end()) return it->second;
  auto later = first_definition_.find(id);
  if (later != first_definition_.end() && later->second >= ln_)
    fail(col, "%" + std::to_string(id) + " is used before it is defined (at line " + std::to_string(later->second + 1) +
                  "); cycles are not allowed and a node must be defined before its users");
  fail(col, "%" + std::to_string(id) + " is not defined");
}

// dim: a SymInt expression; inside a list it ends at ',' or ']', elsewhere also at a blank
// or '}' (parenthesize an expression with blanks in it).
Sym Parser::parse_sym(bool in_list) {
  skip_space();
  size_t b = pos_;
  int depth = 0;
  for (; pos_ < cur_.size(); ++pos_) {
    char c = cur_[pos_];
    if (c == '(') ++depth;
    else if (c == ')' && --depth < 0) break;
    else if (depth == 0 && (c == ',' || c == ']' || c == '#' || (!in_list && (c == ' ' || c == '\t' || c == '}'))))
      break;
  }
  size_t e = pos_;
  while (e > b && (cur_[e - 1] == ' ' || cur_[e - 1] == '\t')) --e;
  std::string_view text = cur_.substr(b, e - b);
  if (text.empty()) fail(b, "expected a dimension (a number, a name like B, or an expression), found " + found());
  if (text.size() > kMaxExprBytes) fail(b, "symbolic expression longer than 256 bytes");
  // Every constant canonicalization folds is at most the product of (|literal| + 1).
  double bound = 1;
  for (size_t i = 0; i < text.size();) {
    if (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_') {
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
    } else if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      size_t s = i;
      double v = 0;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) v = v * 10 + (text[i++] - '0');
      bound *= v + 1;
      if (bound > kMaxMagnitude)
        fail(b + s, "number too large in '" + std::string(text) + "' (shape values must stay below 2^62)");
    } else {
      ++i;
    }
  }
  size_t err = 0;
  auto v = SymInt::parse(text, &err);
  if (!v) fail(b + err, "bad dimension expression '" + std::string(text) + "'");
  return {*v, bound};
}

// '[' (dim (',' dim)*)? ']'
std::vector<Sym> Parser::parse_sym_list() {
  expect('[', "'['");
  std::vector<Sym> r;
  if (accept(']')) return r;
  for (;;) {
    r.push_back(parse_sym(true));
    if (accept(']')) return r;
    expect(',', "',' or ']' in a list");
  }
}

// type := DTYPE '[' dims ']'
std::pair<DType, Shape> Parser::parse_type() {
  skip_space();
  size_t col = pos_;
  std::string_view w = word();
  auto dt = dtype_from_name(w);
  if (!dt) {
    if (w.empty()) fail(col, "expected a type like f32[B, 10], found " + found());
    fail(col, "unknown dtype '" + std::string(w) + "'; expected one of f64 f32 f16 bf16 i64 i32 i16 i8 u64 u32 u16 u8 bool");
  }
  size_t shape_col = pos_;
  Shape shape;
  double bound = 1;
  for (auto& d : parse_sym_list()) {
    shape.push_back(d.value);
    bound *= d.bound;
  }
  if (bound > kMaxMagnitude) fail(shape_col, "shape " + shape_to_string(shape) + " is too large (over 2^62 elements)");
  return {*dt, shape};
}

// prov := '@' STRING? ('step=' INT)? 'backward'?
Provenance Parser::parse_provenance() {
  Provenance p;
  if (!accept('@')) return p;
  if (peek('"')) p.path = parse_string();
  for (;;) {
    skip_space();
    size_t col = pos_;
    std::string_view w = word();
    if (w.empty()) break;
    if (w == "step") {
      expect('=', "'=' after step");
      p.step = static_cast<int>(parse_int(0, kMaxSmallInt, "step"));
    } else if (w == "backward") {
      p.backward = true;
    } else {
      fail(col, "unknown provenance item '" + std::string(w) + "'; expected \"path\", step=N or backward");
    }
  }
  return p;
}

std::string Parser::with_text_ids(const std::string& msg) const {
  std::string r;
  for (size_t i = 0; i < msg.size(); ++i) {
    r += msg[i];
    if (msg[i] != '%' || i + 1 >= msg.size() || !std::isdigit(static_cast<unsigned char>(msg[i + 1]))) continue;
    size_t e = i + 1;
    uint64_t id = 0;
    while (e < msg.size() && std::isdigit(static_cast<unsigned char>(msg[e])) && id < (1ull << 40))
      id = id * 10 + (msg[e++] - '0');
    auto it = id <= UINT32_MAX ? text_id_.find(static_cast<uint32_t>(id)) : text_id_.end();
    r += it != text_id_.end() ? std::to_string(it->second) : std::string(msg.substr(i + 1, e - i - 1));
    i = e - 1;
  }
  return r;
}

NodeRef Parser::add_node(int64_t id, Op op, DType dt, Shape shape, std::vector<NodeRef> in, Attrs a, Provenance p,
                         size_t col) {
  std::string err = prim::check_node(op, dt, shape, in, a);
  if (!err.empty()) fail(col, with_text_ids(err));
  NodeRef n = make_node(op, dt, std::move(shape), std::move(in), std::move(a), p);
  nodes_.emplace(id, n);
  defined_at_.emplace(id, ln_);
  line_of_.emplace(n, ln_);
  text_id_.emplace(n->id, id);
  return n;
}

// ---- statements
void Parser::statement() {
  skip_space();
  if (peek('%')) return node_statement();
  size_t col = pos_;
  std::string_view w = word();
  if (w == "in") return input_statement();
  if (w == "out") return output_statement();
  pos_ = col;
  fail(col, "expected a statement (`%ID = Op(…) : type`, `in %ID NAME : type` or `out NAME = %ID`), found " + found());
}

// input := 'in' ID NAME ':' type prov?
void Parser::input_statement() {
  skip_space();
  size_t id_col = pos_;
  int64_t id = parse_id();
  if (auto it = defined_at_.find(id); it != defined_at_.end())
    fail(id_col, "%" + std::to_string(id) + " is already defined at line " + std::to_string(it->second + 1));
  skip_space();
  size_t name_col = pos_;
  std::string name = parse_name("an input name");
  expect(':', "':' and the input's type");
  auto [dt, shape] = parse_type();
  Provenance p = parse_provenance();
  expect_end();
  if (auto it = input_names_.find(name); it != input_names_.end())
    fail(name_col, "duplicate input name '" + name + "' (first declared at line " + std::to_string(it->second + 1) + ")");
  input_names_.emplace(name, ln_);
  Attrs a;
  a.name = name;
  inputs_.push_back(add_node(id, Op::Input, dt, std::move(shape), {}, std::move(a), p, name_col));
}

// node := ID '=' OP ('(' ids ')')? attrs? ':' type prov?
void Parser::node_statement() {
  skip_space();
  size_t id_col = pos_;
  int64_t id = parse_id();
  if (auto it = defined_at_.find(id); it != defined_at_.end())
    fail(id_col, "%" + std::to_string(id) + " is already defined at line " + std::to_string(it->second + 1));
  expect('=', "'=' after the node id");
  skip_space();
  size_t op_col = pos_;
  std::string_view name = word();
  if (name.empty()) fail(op_col, "expected an op name, found " + found());
  auto op = op_from_name(name);
  if (!op) fail(op_col, "unknown op '" + std::string(name) + "'" + op_suggestion(name));
  std::vector<NodeRef> in;
  skip_space();
  size_t paren_col = pos_;
  if (accept('(') && !accept(')')) {
    for (;;) {
      in.push_back(parse_use());
      if (accept(')')) break;
      expect(',', "',' or ')' in the operand list");
    }
  }
  int arity = op_info(*op).arity;
  if (arity >= 0 && static_cast<int>(in.size()) != arity)
    fail(in.empty() ? op_col : paren_col, std::string(name) + " expects " + std::to_string(arity) + " operand(s), got " +
                                              std::to_string(in.size()));
  // Attributes may depend on the type (Const values, View shapes): remember where they are.
  skip_space();
  size_t attrs_col = pos_, attrs_end = pos_;
  if (peek('{')) {
    bool in_string = false;
    for (; attrs_end < cur_.size(); ++attrs_end) {
      char c = cur_[attrs_end];
      if (in_string && c == '\\') ++attrs_end;
      else if (c == '"') in_string = !in_string;
      else if (c == '}' && !in_string) break;
    }
    if (attrs_end >= cur_.size()) fail(attrs_col, "unclosed '{' (the attributes must end with '}' on this line)");
    pos_ = attrs_end + 1;
  }
  expect(':', "':' and the node's type, e.g. `: f32[B, 10]`");
  auto [dt, shape] = parse_type();
  Provenance p = parse_provenance();
  expect_end();
  size_t after = pos_;
  Attrs a;
  if (attrs_end > attrs_col) {
    pos_ = attrs_col;
    cur_id_ = id;
    a = parse_attrs(*op, dt, shape, attrs_col);
    pos_ = after;
  } else if (*op == Op::Input || *op == Op::Const || *op == Op::Index || *op == Op::Take || *op == Op::View ||
             *op == Op::Reduce || *op == Op::Extern) {
    fail(op_col, std::string(name) + " needs attributes in braces, e.g. " +
                     (*op == Op::Const ? "{value=1}" : *op == Op::View ? "{strides=[1]}" : *op == Op::Reduce ? "{op=add axes=[0]}" :
                      *op == Op::Input || *op == Op::Extern ? "{name=\"x\"}" : "{axis=0}"));
  }
  add_node(id, *op, dt, std::move(shape), std::move(in), std::move(a), p, op_col);
}

// output := 'out' NAME '=' ID
void Parser::output_statement() {
  skip_space();
  size_t name_col = pos_;
  std::string name = parse_name("an output name");
  expect('=', "'=' after the output name");
  NodeRef n = parse_use();
  expect_end();
  if (auto it = output_names_.find(name); it != output_names_.end())
    fail(name_col, "duplicate output name '" + name + "' (first at line " + std::to_string(it->second + 1) + ")");
  output_names_.emplace(name, ln_);
  outputs_.push_back({name, n});
}

Graph Parser::parse() {
  ProvenanceContextReset no_context;
  check_encoding();
  for (size_t b = 0;;) {
    size_t e = text_.find('\n', b);
    std::string_view l = text_.substr(b, e == text_.npos ? text_.npos : e - b);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    lines_.push_back(l);
    if (e == text_.npos) break;
    b = e + 1;
  }
  // Pre-scan definitions so a forward use can say where the node is defined.
  for (size_t i = 0; i < lines_.size(); ++i) {
    std::string_view l = lines_[i];
    size_t k = l.find_first_not_of(" \t");
    if (k == l.npos) continue;
    if (l.substr(k, 3) == "in ") k = l.find_first_not_of(" \t", k + 3);
    if (k == l.npos || l[k] != '%') continue;
    int64_t id = 0;
    auto [p, ec] = std::from_chars(l.data() + k + 1, l.data() + l.size(), id);
    if (ec == std::errc()) first_definition_.emplace(id, i);
  }
  size_t i = 0;
  for (; i < lines_.size(); ++i) {
    set_line(i);
    std::string_view rest = cur_.substr(std::min(cur_.size(), cur_.find_first_not_of(" \t")));
    if (rest.substr(0, 7) == "# lathe") {
      pos_ = cur_.size() - rest.size() + 7;
      skip_space();
      size_t col = pos_;
      while (pos_ < cur_.size() && cur_[pos_] != ' ' && cur_[pos_] != '\t') ++pos_;
      std::string_view version = cur_.substr(col, pos_ - col);
      if (version != "1")
        fail(col, "unsupported .lathe version '" + std::string(version) + "' (this Lathe reads version 1)");
    }
    if (significant(i)) break;
  }
  if (i == lines_.size()) fail_at(0, 0, "empty file: expected `graph {`");
  size_t col = pos_;
  if (word() != "graph" || !accept('{')) fail(col, "expected `graph {` to open the graph, found " + (pos_ = col, found()));
  expect_end();
  size_t open_line = i;
  for (++i; i < lines_.size(); ++i) {
    if (!significant(i)) continue;
    if (accept('}')) break;
    statement();
  }
  if (i >= lines_.size()) {
    size_t last = lines_.size() - 1;
    while (last > 0 && lines_[last].find_first_not_of(" \t") == std::string_view::npos) --last;
    fail_at(last, lines_[last].size(),
            "unexpected end of file: expected '}' to close the graph opened at line " + std::to_string(open_line + 1) +
                " (is the file truncated?)");
  }
  expect_end();
  size_t close_line = i;
  for (++i; i < lines_.size(); ++i)
    if (significant(i)) fail(pos_, "unexpected text after the graph's closing '}'");
  if (outputs_.empty()) fail_at(close_line, 0, "the graph has no outputs; add a line `out NAME = %ID` before '}'");

  Graph g;
  g.inputs = inputs_;
  g.outputs = outputs_;
  auto problems = verify(g);
  if (!problems.empty()) {
    const Diagnostic& d = problems[0];
    NodeRef n = d.node >= 0 ? node_by_id(static_cast<uint32_t>(d.node)) : nullptr;
    auto it = n ? line_of_.find(n) : line_of_.end();
    size_t line = it != line_of_.end() ? it->second : close_line;
    std::string_view l = lines_[line];
    fail_at(line, std::min(l.size(), l.find_first_not_of(" \t")), with_text_ids(d.message));
  }
  return g;
}

}  // namespace text_detail

using text_detail::Parser;

Graph parse_graph(std::string_view text, const std::string& filename) { return Parser(text, filename).parse(); }

Graph parse_graph(std::string_view text, const std::string& filename, const std::string& sidecar_path) {
  SidecarReader sidecar(sidecar_path);
  return Parser(text, filename, &sidecar).parse();
}

}  // namespace lathe
