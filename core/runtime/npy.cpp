// npy.cpp — reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// Layout: "\x93NUMPY", major, minor, header length (u16 LE for 1.x, u32 LE for 2.x/3.x),
// then a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a newline, then the raw little-endian C-order data.
// Supported descr: |b1 |u1 |i1 <i2 <i4 <i8 <f2 <f4 <f8 ('=' and '|' accepted where the
// order is unambiguous). Refused with a clear UserError: big-endian data, Fortran order,
// other dtypes (including bf16, which NumPy has no type for), malformed headers and
// truncated data. Writing uses version 1.0 unless the header needs 2.0.
#include "core/runtime/npy.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/ir/diag.h"

namespace lathe {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  Diagnostic d;
  d.file = path;
  d.message = "invalid .npy file: " + what;
  throw UserError(d);
}

// A cursor over the header dict text; each parse_* names what it expected on failure.
struct HeaderParser {
  const std::string& path;
  std::string_view s;
  size_t pos = 0;

  [[noreturn]] void expected(const std::string& what) {
    fail(path, "header: expected " + what + " at column " + std::to_string(pos + 1) + " of \"" + std::string(s) + "\"");
  }
  void skip_ws() { while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos; }
  bool eat(char c) {
    skip_ws();
    if (pos < s.size() && s[pos] == c) { ++pos; return true; }
    return false;
  }
  void need(char c) { if (!eat(c)) expected(std::string("'") + c + "'"); }
  std::string parse_string() {
    skip_ws();
    if (pos >= s.size() || (s[pos] != '\'' && s[pos] != '"')) expected("a quoted string");
    char q = s[pos++];
    size_t start = pos;
    while (pos < s.size() && s[pos] != q) ++pos;
    if (pos >= s.size()) expected("a closing quote");
    return std::string(s.substr(start, pos++ - start));
  }
  bool parse_bool() {
    skip_ws();
    if (s.substr(pos, 4) == "True") { pos += 4; return true; }
    if (s.substr(pos, 5) == "False") { pos += 5; return false; }
    expected("True or False");
  }
  std::vector<int64_t> parse_shape() {
    need('(');
    std::vector<int64_t> dims;
    while (!eat(')')) {
      skip_ws();
      size_t start = pos;
      int64_t v = 0;
      while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
        if (v > (int64_t(1) << 50)) expected("a dimension below 2^50");
        v = v * 10 + (s[pos++] - '0');
      }
      if (pos == start) expected("a non-negative integer dimension");
      if (pos < s.size() && s[pos] == 'L') ++pos;  // Python 2 long suffix
      dims.push_back(v);
      if (!eat(',')) { need(')'); break; }
    }
    return dims;
  }
};

struct Header {
  DType dtype;
  std::vector<int64_t> shape;
};

DType dtype_from_descr(const std::string& path, const std::string& descr) {
  if (descr.size() < 3) fail(path, "unsupported dtype descr '" + descr + "'");
  char order = descr[0];
  std::string kind = descr.substr(1);
  bool single_byte = kind == "b1" || kind == "u1" || kind == "i1";
  if (order == '>' && !single_byte)
    fail(path, "big-endian data (descr '" + descr + "') is not supported; save it little-endian (astype('<" + kind + "'))");
  if (order != '<' && order != '|' && order != '=' && order != '>') fail(path, "unsupported dtype descr '" + descr + "'");
  static const std::pair<const char*, DType> table[] = {
      {"b1", DType::Bool}, {"u1", DType::U8}, {"i1", DType::I8}, {"i2", DType::I16}, {"i4", DType::I32},
      {"i8", DType::I64}, {"f2", DType::F16}, {"f4", DType::F32}, {"f8", DType::F64},
      {"u2", DType::U16}, {"u4", DType::U32}, {"u8", DType::U64}};
  for (auto& [k, dt] : table)
    if (kind == k) return dt;
  fail(path, "unsupported dtype descr '" + descr +
                 "' (Lathe reads bool, uint8/16/32/64, int8/16/32/64 and float16/32/64; cast the array first)");
}

Header parse_header(const std::string& path, std::string_view text) {
  HeaderParser p{path, text};
  std::optional<DType> dt;
  std::optional<std::vector<int64_t>> shape;
  bool fortran = false, have_fortran = false;
  p.need('{');
  while (!p.eat('}')) {
    std::string key = p.parse_string();
    p.need(':');
    if (key == "descr") {
      p.skip_ws();
      if (p.pos < text.size() && text[p.pos] == '[') fail(path, "structured dtypes (a descr list) are not supported");
      dt = dtype_from_descr(path, p.parse_string());
    } else if (key == "fortran_order") {
      fortran = p.parse_bool();
      have_fortran = true;
    } else if (key == "shape") {
      shape = p.parse_shape();
    } else {
      fail(path, "header: unknown key '" + key + "'");
    }
    if (!p.eat(',')) { p.need('}'); break; }
  }
  if (!dt || !shape || !have_fortran) fail(path, "header must have 'descr', 'fortran_order' and 'shape'");
  if (fortran) fail(path, "Fortran-order arrays are not supported; save a C-order array (np.ascontiguousarray)");
  return {*dt, *shape};
}

}  // namespace

HostTensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError(Diagnostic{"cannot open '" + path + "': " + std::strerror(errno)});
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) fail(path, "missing the \\x93NUMPY magic");
  auto u8 = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])); };
  uint32_t major = u8(6);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = u8(8) | (u8(9) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(path, "truncated header");
    header_len = u8(8) | (u8(9) << 8) | (u8(10) << 16) | (u8(11) << 24);
    header_start = 12;
  } else {
    fail(path, "unsupported format version " + std::to_string(major) + "." + std::to_string(u8(7)));
  }
  if (bytes.size() - header_start < header_len) fail(path, "truncated header");
  Header h = parse_header(path, std::string_view(bytes).substr(header_start, header_len));

  // Check the data size before allocating, so a lying header cannot ask for terabytes.
  size_t available = bytes.size() - header_start - header_len;
  int64_t numel = 1;
  for (int64_t d : h.shape) {
    if (d != 0 && numel > static_cast<int64_t>(available) / d) numel = -1;
    if (numel < 0) break;
    numel *= d;
  }
  size_t need = numel < 0 ? 0 : static_cast<size_t>(numel) * dtype_size(h.dtype);
  if (numel < 0 || need > available) {
    std::string s = "(";
    for (size_t i = 0; i < h.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(h.shape[i]);
    fail(path, "truncated data: shape " + s + ") of " + std::string(dtype_name(h.dtype)) + " needs more than the " +
                   std::to_string(available) + " bytes present");
  }
  HostTensor t(h.dtype, h.shape);
  if (need) std::memcpy(t.data(), bytes.data() + header_start + header_len, need);
  if (h.dtype == DType::Bool) {
    auto* p = t.ptr<uint8_t>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] != 0;
  }
  return t;
}

void write_npy(const std::string& path, const HostTensor& t) {
  const char* descr = nullptr;
  switch (t.dtype()) {
    case DType::Bool: descr = "|b1"; break;
    case DType::U8: descr = "|u1"; break;
    case DType::I8: descr = "|i1"; break;
    case DType::I16: descr = "<i2"; break;
    case DType::I32: descr = "<i4"; break;
    case DType::I64: descr = "<i8"; break;
    case DType::F16: descr = "<f2"; break;
    case DType::F32: descr = "<f4"; break;
    case DType::F64: descr = "<f8"; break;
    case DType::U16: descr = "<u2"; break;
    case DType::U32: descr = "<u4"; break;
    case DType::U64: descr = "<u8"; break;
    case DType::BF16:
      throw UserError(Diagnostic{"cannot write '" + path + "': NumPy has no bfloat16 dtype; cast the tensor to f32 first"});
  }
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape()[i]);
  shape += t.rank() == 1 ? ",)" : ")";
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that magic + length field + header is a multiple of 64, ending in '\n'.
  bool v2 = dict.size() + 1 + 10 > 65535;
  size_t prefix = v2 ? 12 : 10;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string head(kMagic, 6);
  head += static_cast<char>(v2 ? 2 : 1);
  head += '\0';
  uint32_t len = static_cast<uint32_t>(dict.size());
  head += static_cast<char>(len & 0xff);
  head += static_cast<char>((len >> 8) & 0xff);
  if (v2) {
    head += static_cast<char>((len >> 16) & 0xff);
    head += static_cast<char>((len >> 24) & 0xff);
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw UserError(Diagnostic{"cannot write '" + path + "': " + std::strerror(errno)});
  f << head << dict;
  f.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
  f.close();
  if (!f) throw UserError(Diagnostic{"cannot write '" + path + "': " + std::strerror(errno)});
}

}  // namespace lathe
