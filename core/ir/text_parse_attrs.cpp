// text_parse_attrs.cpp — the .lathe parser's attributes: `{key=value …}` per op (text_parse.cpp
// has the grammar), numbers, tensor literals and data in the binary sidecar.
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

namespace lathe::text_detail {

// ---- attributes: attrs := '{' (KEY '=' value)* '}', the keys depending on the op
namespace {
std::string_view allowed_keys(Op op) {
  switch (op) {
    case Op::Input: return "name";
    case Op::Const: return "value data bin check";
    case Op::Index: case Op::Take: return "axis";
    case Op::View: return "strides offset mask";
    case Op::Reduce: return "op axes";
    case Op::Extern: return "name ints";
    default: return "";
  }
}
bool key_allowed(Op op, std::string_view key) {
  std::string_view keys = allowed_keys(op);
  for (size_t b = 0; b < keys.size();) {
    size_t e = std::min(keys.size(), keys.find(' ', b));
    if (keys.substr(b, e - b) == key) return true;
    b = e + 1;
  }
  return false;
}
}  // namespace

static std::string_view number_token(std::string_view line, size_t& pos);

Attrs Parser::parse_attrs(Op op, DType dt, const Shape& shape, size_t brace_col) {
  expect('{', "'{'");
  Attrs a;
  std::set<std::string, std::less<>> seen;
  ViewSpec view;
  view.shape = shape;
  double view_bound = 0;
  size_t bin_at = 0;
  uint64_t bin_offset = 0, bin_bytes = 0, bin_check = 0;
  auto int_list = [&](int64_t lo, int64_t hi, const std::string& what) {
    std::vector<int64_t> r;
    expect('[', "'[' to start the list of " + what);
    if (accept(']')) return r;
    for (;;) {
      r.push_back(parse_int(lo, hi, what));
      if (accept(']')) return r;
      expect(',', "',' or ']' in the list of " + what);
    }
  };
  while (!accept('}')) {
    skip_space();
    size_t key_col = pos_;
    std::string key(word());
    if (key.empty()) fail(key_col, "expected an attribute name or '}', found " + found());
    if (!key_allowed(op, key)) {
      std::string keys(allowed_keys(op));
      fail(key_col, std::string(op_name(op)) + (keys.empty() ? " takes no attributes" : " takes attributes: " + keys) +
                        "; '" + key + "' is not one of them");
    }
    if (!seen.insert(key).second) fail(key_col, "attribute '" + key + "' is given twice");
    expect('=', "'=' after '" + key + "'");
    skip_space();
    size_t value_col = pos_;
    if (key == "name") {
      a.name = parse_name("a name");
      if (a.name.empty()) fail(value_col, "the name must not be empty");
    } else if (key == "value") {
      parse_const_value(a, dt);
    } else if (key == "data") {
      parse_const_data(a, dt, shape, value_col);
    } else if (key == "bin") {
      std::vector<int64_t> v = int_list(0, std::numeric_limits<int64_t>::max(), "sidecar offset and size");
      if (v.size() != 2) fail(value_col, "bin= takes [OFFSET, NBYTES] (where the tensor's bytes lie in the sidecar)");
      bin_at = value_col;
      bin_offset = static_cast<uint64_t>(v[0]);
      bin_bytes = static_cast<uint64_t>(v[1]);
    } else if (key == "check") {
      std::string_view tok = number_token(cur_, pos_);
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), bin_check, 16);
      if (tok.size() != 16 || ec != std::errc() || p != tok.data() + tok.size())
        fail(value_col, "check= takes 16 hex digits");
    } else if (key == "axis") {
      a.axis = static_cast<int>(parse_int(-kMaxSmallInt, kMaxSmallInt, "axis"));
    } else if (key == "op") {
      std::string_view w = word();
      auto r = reduce_op_from_name(w);
      if (!r) fail(value_col, "unknown reduce op '" + std::string(w) + "'; expected add, max or mul");
      a.reduce = *r;
    } else if (key == "axes") {
      for (int64_t v : int_list(-kMaxSmallInt, kMaxSmallInt, "axes")) a.axes.push_back(static_cast<int>(v));
    } else if (key == "ints") {
      a.ints = int_list(-kMaxSmallInt, kMaxSmallInt, "ints");
    } else if (key == "strides") {
      auto strides = parse_sym_list();
      if (strides.size() != shape.size())
        fail(value_col, "View has " + std::to_string(strides.size()) + " strides but its type has " +
                            std::to_string(shape.size()) + " dims");
      for (size_t d = 0; d < strides.size(); ++d) {
        view.strides.push_back(strides[d].value);
        // check_node evaluates bounds only when everything is constant: |stride| * dim each
        double dim = shape[d].is_const() ? std::abs(static_cast<double>(shape[d].value())) : 1;
        view_bound += strides[d].bound * std::max(1.0, dim);
      }
    } else if (key == "offset") {
      Sym o = parse_sym(false);
      view.offset = o.value;
      view_bound += o.bound;
    } else if (key == "mask") {
      expect('[', "'[' to start the mask, e.g. mask=[[0, 4], [1, 3]]");
      if (!accept(']')) {
        for (;;) {
          expect('[', "'[' to start a [lo, hi) range");
          SymInt lo = parse_sym(true).value;
          expect(',', "',' between lo and hi");
          SymInt hi = parse_sym(true).value;
          expect(']', "']' to end the range");
          view.mask.push_back({lo, hi});
          if (accept(']')) break;
          expect(',', "',' or ']' in the mask");
        }
      }
    }
  }
  auto need = [&](bool ok, const char* what) {
    if (!ok) fail(brace_col, std::string(op_name(op)) + " needs " + what);
  };
  switch (op) {
    case Op::Input: need(seen.count("name"), "name=\"...\""); break;
    case Op::Const:
      need(seen.count("value") + seen.count("data") + seen.count("bin") == 1,
           "exactly one of value=NUMBER, data=[...] or bin=[OFFSET, NBYTES]");
      need(seen.count("bin") == seen.count("check"), "check=HEX with bin=[...], and only then");
      if (seen.count("bin")) load_bin(a, dt, shape, bin_at, bin_offset, bin_bytes, bin_check);
      break;
    case Op::Index: case Op::Take: need(seen.count("axis"), "axis=N"); break;
    case Op::Reduce: need(seen.count("op") && seen.count("axes"), "op=add|max|mul and axes=[...]"); break;
    case Op::Extern: need(seen.count("name"), "name=\"kernel\""); break;
    case Op::View:
      need(seen.count("strides"), "strides=[...]");
      if (!view.mask.empty() && view.mask.size() != shape.size())
        fail(brace_col, "View mask has " + std::to_string(view.mask.size()) + " ranges but its type has " +
                            std::to_string(shape.size()) + " dims");
      if (view_bound > kMaxMagnitude) fail(brace_col, "View strides and offset are too large (over 2^62 elements)");
      a.view = std::make_shared<ViewSpec>(std::move(view));
      break;
    default: break;
  }
  return a;
}

// A number token: [A-Za-z0-9_.+-]+ (digits, signs, exponents, nan, inf, true, false).
static std::string_view number_token(std::string_view line, size_t& pos) {
  size_t b = pos;
  while (pos < line.size() && (std::isalnum(static_cast<unsigned char>(line[pos])) || line[pos] == '_' ||
                               line[pos] == '.' || line[pos] == '+' || line[pos] == '-'))
    ++pos;
  return line.substr(b, pos - b);
}

double Parser::parse_float_token(std::string_view tok, size_t col, DType dt) {
  if (tok == "nan") return std::nan("");
  if (tok == "inf" || tok == "+inf") return INFINITY;
  if (tok == "-inf") return -INFINITY;
  std::string_view t = tok;
  if (!t.empty() && t[0] == '+') t.remove_prefix(1);
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec == std::errc::invalid_argument || p != t.data() + t.size())
    fail(col, "expected a number (or nan, inf, -inf), found '" + std::string(tok) + "'");
  if (ec == std::errc::result_out_of_range)
    fail(col, "number '" + std::string(tok) + "' is out of range for " + std::string(dtype_name(dt)));
  double r = v;
  if (dt != DType::F64) {
    if (std::abs(v) > 3.5e38) fail(col, "number '" + std::string(tok) + "' is out of range for " + std::string(dtype_name(dt)));
    float f = static_cast<float>(v);
    r = dt == DType::F16 ? f16_to_f32(f32_to_f16(f)) : dt == DType::BF16 ? bf16_to_f32(f32_to_bf16(f)) : f;
  }
  if (std::isinf(r)) fail(col, "number '" + std::string(tok) + "' is out of range for " + std::string(dtype_name(dt)));
  return r;
}

int64_t Parser::parse_int_token(std::string_view tok, size_t col, DType dt) {
  if (dt == DType::Bool) {
    if (tok == "true" || tok == "1") return 1;
    if (tok == "false" || tok == "0") return 0;
    fail(col, "expected true or false for a bool, found '" + std::string(tok) + "'");
  }
  std::string_view t = tok;
  if (!t.empty() && t[0] == '+') t.remove_prefix(1);
  if (dt == DType::U64) {  // 0 … 2^64-1, held as its bit pattern in an int64
    uint64_t u = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), u);
    if (t.empty() || t[0] == '-' || ec == std::errc::result_out_of_range)
      fail(col, "integer '" + std::string(tok) + "' is out of range for u64");
    if (ec == std::errc::invalid_argument || p != t.data() + t.size())
      fail(col, "expected an integer for dtype u64, found '" + std::string(tok) + "'");
    return static_cast<int64_t>(u);
  }
  int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec == std::errc::invalid_argument || p != t.data() + t.size())
    fail(col, "expected an integer for dtype " + std::string(dtype_name(dt)) + ", found '" + std::string(tok) + "'");
  if (ec == std::errc::result_out_of_range || wrap_int(v, dt) != v)
    fail(col, "integer '" + std::string(tok) + "' is out of range for " + std::string(dtype_name(dt)));
  return v;
}

void Parser::parse_const_value(Attrs& a, DType dt) {
  skip_space();
  size_t col = pos_;
  std::string_view tok = number_token(cur_, pos_);
  if (is_float(dt)) {
    a.f = parse_float_token(tok, col, dt);
    a.i = 0;
  } else {
    a.i = parse_int_token(tok, col, dt);
    a.f = static_cast<double>(a.i);
  }
}

// data=[NUMBER, …]: counted against the declared shape before anything is allocated.
void Parser::parse_const_data(Attrs& a, DType dt, const Shape& shape, size_t col) {
  expect('[', "'[' to start the tensor literal");
  std::vector<std::pair<std::string_view, size_t>> tokens;
  if (!accept(']')) {
    for (;;) {
      skip_space();
      size_t c = pos_;
      std::string_view tok = number_token(cur_, pos_);
      if (tok.empty()) fail(c, "expected a number in the tensor literal, found " + found());
      tokens.push_back({tok, c});
      if (accept(']')) break;
      expect(',', "',' or ']' in the tensor literal");
    }
  }
  if (!shape_is_const(shape)) fail(col, "a tensor literal needs a constant shape, not " + shape_to_string(shape));
  int64_t numel = shape_numel(shape).value();
  if (numel != static_cast<int64_t>(tokens.size()))
    fail(col, "the tensor literal has " + std::to_string(tokens.size()) + " values but its type " +
                  std::string(dtype_name(dt)) + shape_to_string(shape) + " needs " + std::to_string(numel));
  auto t = std::make_shared<HostTensor>(dt, shape_values(shape));
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (is_float(dt)) t->set_f64(static_cast<int64_t>(i), parse_float_token(tokens[i].first, tokens[i].second, dt));
    else t->set_i64(static_cast<int64_t>(i), parse_int_token(tokens[i].first, tokens[i].second, dt));
  }
  a.data = std::move(t);
}

// bin=[OFFSET, NBYTES] check=HEX: the bytes in the sidecar, checked before they are used.
void Parser::load_bin(Attrs& a, DType dt, const Shape& shape, size_t col, uint64_t offset, uint64_t nbytes,
                      uint64_t check) {
  std::string node = "%" + std::to_string(cur_id_) + " (" + std::string(dtype_name(dt)) + shape_to_string(shape) + ")";
  if (!shape_is_const(shape)) fail(col, node + ": a tensor constant needs a constant shape");
  int64_t numel = shape_numel(shape).value();
  uint64_t want = static_cast<uint64_t>(numel) * dtype_size(dt);
  if (nbytes != want)
    fail(col, node + ": bin= says " + std::to_string(nbytes) + " bytes but the type holds " + std::to_string(want));
  if (!sidecar_)
    fail(col, node + ": the data is in a binary sidecar, and this text was not read from a file (load it with load_graph)");
  std::string error;
  HostTensor t = sidecar_->tensor(offset, nbytes, check, dt, shape_values(shape), error);
  if (!error.empty()) fail(col, node + ": " + error);
  a.data = std::make_shared<HostTensor>(std::move(t));
}

}  // namespace lathe::text_detail
