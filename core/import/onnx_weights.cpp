// onnx_weights.cpp — strip_weights(): the model's structure without its large raw_data,
// and where a broken file breaks. See onnx_weights.h. Only the wire format is read here;
// protobuf checks everything else.
#include "core/import/onnx_weights.h"

namespace lathe::onnx_import {

namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };
// ModelProto.graph; GraphProto.node, .initializer; NodeProto.name, .op_type; TensorProto.name, .raw_data
constexpr uint32_t kModelGraph = 7, kGraphNode = 1, kGraphInitializer = 5, kNodeName = 3, kNodeOpType = 4,
                   kTensorName = 8, kTensorRawData = 9;

// One field read from [p, end): number, wire type, the whole field [start, p) and, for
// length-delimited fields, the payload [body, p). On failure `why` says what broke, and
// for a length that runs past the end, body/declared/remaining describe the cut.
struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  std::string why;
  uint64_t declared = 0;

  bool done() const { return p >= end; }
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) return fail("the file ends inside a varint");
      uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return fail("a varint is longer than 10 bytes");
  }
  bool fail(std::string w) {
    why = std::move(w);
    return false;
  }
  bool field(uint32_t& number, int& type, const uint8_t*& start, const uint8_t*& body) {
    start = p;
    body = nullptr;
    uint64_t tag = 0;
    if (!varint(tag)) return false;
    if (tag == 0 || (tag >> 3) > 0x1fffffff) return fail("invalid field tag " + std::to_string(tag));
    number = static_cast<uint32_t>(tag >> 3);
    type = static_cast<int>(tag & 7);
    uint64_t n = 0;
    switch (type) {
      case kVarint: return varint(n);
      case kFixed64: if (end - p < 8) return fail("the file ends inside a fixed64"); p += 8; return true;
      case kFixed32: if (end - p < 4) return fail("the file ends inside a fixed32"); p += 4; return true;
      case kLen:
        if (!varint(n)) return false;
        body = p;
        if (n > static_cast<uint64_t>(end - p)) {
          declared = n;
          return fail("it declares " + std::to_string(n) + " bytes, " + std::to_string(end - p) + " remain");
        }
        p += n;
        return true;
      default: return fail("wire type " + std::to_string(type));  // groups (deprecated), invalid
    }
  }
};

// The string field `number` of a (possibly cut) message, "" when absent.
std::string find_string(const uint8_t* b, const uint8_t* e, uint32_t number) {
  Reader r{b, e};
  uint32_t num = 0;
  int type = 0;
  const uint8_t *start, *body;
  std::string found;
  while (!r.done() && r.field(num, type, start, body))
    if (num == number && type == kLen) found.assign(reinterpret_cast<const char*>(body), r.p - body);
  if (found.size() > 200) found = found.substr(0, 200) + "…";
  return found;
}

void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
}

void put_len_field(std::string& s, uint32_t number, const std::string& payload) {
  put_varint(s, (uint64_t(number) << 3) | kLen);
  put_varint(s, payload.size());
  s += payload;
}

void append(std::string& s, const uint8_t* b, const uint8_t* e) { s.append(reinterpret_cast<const char*>(b), e - b); }

// TensorProto: drops a large raw_data when it is the only one (protobuf keeps the last of
// repeated singular fields; with several, keep them all and let protobuf read them).
bool strip_tensor(const uint8_t* base, const uint8_t* b, const uint8_t* e, std::string& out,
                  std::optional<ByteRange>& raw, std::string& why) {
  Reader r{b, e};
  int raw_fields = 0;
  const uint8_t *raw_start = nullptr, *raw_body = nullptr, *raw_end = nullptr;
  uint32_t num = 0;
  int type = 0;
  const uint8_t *start, *body;
  while (!r.done()) {
    if (!r.field(num, type, start, body)) {
      why = r.why;
      return false;
    }
    if (num == kTensorRawData && type == kLen) {
      ++raw_fields;
      raw_start = start;
      raw_body = body;
      raw_end = r.p;
    }
  }
  if (raw_fields != 1 || static_cast<size_t>(raw_end - raw_body) < kStripBytes) {
    append(out, b, e);
    return true;
  }
  append(out, b, raw_start);
  append(out, raw_end, e);
  raw = ByteRange{static_cast<size_t>(raw_body - base), static_cast<size_t>(raw_end - raw_body)};
  return true;
}

// What a (possibly cut) node or initializer is called in messages.
std::string node_label(const uint8_t* b, const uint8_t* e, int index) {
  std::string name = find_string(b, e, kNodeName), op = find_string(b, e, kNodeOpType);
  std::string r = "node " + std::to_string(index);
  if (!name.empty()) r += " '" + name + "'";
  if (!op.empty()) r += " (" + op + ")";
  return r;
}
std::string initializer_label(const uint8_t* b, const uint8_t* e, int index) {
  std::string name = find_string(b, e, kTensorName);
  return "initializer " + std::to_string(index) + (name.empty() ? "" : " '" + name + "'");
}

// GraphProto [b, e). With out == nullptr it only looks for the problem (a cut graph).
bool strip_graph(const uint8_t* base, const uint8_t* b, const uint8_t* e, std::string* out,
                 std::vector<std::optional<ByteRange>>& raws, std::string& why) {
  Reader r{b, e};
  uint32_t num = 0;
  int type = 0;
  const uint8_t *start, *body;
  int nodes = 0, inits = 0;
  while (!r.done()) {
    bool ok = r.field(num, type, start, body);
    if (!ok && !body) {
      why = r.why + " in the graph after " + std::to_string(nodes) + " nodes and " + std::to_string(inits) + " initializers";
      return false;
    }
    if (num == kGraphInitializer && type == kLen) {
      std::string label = initializer_label(body, ok ? r.p : e, inits);
      std::string t, inner;
      std::optional<ByteRange> raw;
      if (!ok || !strip_tensor(base, body, r.p, t, raw, inner)) {
        if (!ok) {
          // the initializer is cut: say which field of it (raw_data, most likely)
          Reader c{body, e};
          uint32_t n2 = 0;
          int t2 = 0;
          const uint8_t *s2, *b2;
          while (!c.done() && c.field(n2, t2, s2, b2)) {}
          inner = n2 == kTensorRawData && !c.why.empty() && c.declared
                      ? "its raw_data declares " + std::to_string(c.declared) + " bytes, " + std::to_string(e - b2) + " remain"
                      : c.why.empty() ? r.why : c.why;
          why = "the file ends inside " + label + ": " + inner;
        } else {
          why = label + ": " + inner;
        }
        return false;
      }
      ++inits;
      raws.push_back(raw);
      if (out) put_len_field(*out, num, t);
    } else if (!ok) {
      why = "the file ends inside " + (num == kGraphNode ? node_label(body, e, nodes) : "graph field " + std::to_string(num)) +
            ": " + r.why;
      return false;
    } else {
      if (num == kGraphNode) ++nodes;
      if (out) append(*out, start, r.p);
    }
  }
  return true;
}

}  // namespace

std::optional<StrippedModel> strip_weights(const uint8_t* data, size_t size, std::string* problem) {
  StrippedModel m;
  Reader r{data, data + size};
  uint32_t num = 0;
  int type = 0;
  const uint8_t *start, *body;
  std::string why;
  while (!r.done()) {
    if (!r.field(num, type, start, body)) {
      if (num == kModelGraph && body) {  // the graph runs past the end: find where inside it
        std::vector<std::optional<ByteRange>> ignored;
        if (strip_graph(data, body, data + size, nullptr, ignored, why)) why = "the file ends inside the graph: " + r.why;
      } else {
        why = (body ? "field " + std::to_string(num) + " of the model: " : "") + r.why;
      }
      if (problem) *problem = why;
      return std::nullopt;
    }
    if (num == kModelGraph && type == kLen) {
      std::string g;
      if (!strip_graph(data, body, r.p, &g, m.raw, why)) {
        if (problem) *problem = why;
        return std::nullopt;
      }
      put_len_field(m.bytes, num, g);
    } else {
      append(m.bytes, start, r.p);
    }
  }
  return m;
}

}  // namespace lathe::onnx_import
