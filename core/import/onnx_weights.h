// onnx_weights.h — internal to core/import: reading a model without copying its weights.
//
// A ModelProto parsed by protobuf copies every initializer's raw_data into a std::string,
// so a 650 MB model would sit in memory three times (file, message, tensors). Instead the
// file is mapped, and strip_weights() copies only its structure: it walks the protobuf wire
// format down ModelProto.graph (7) → GraphProto.initializer (5) → TensorProto.raw_data (9),
// leaves out every large raw_data field and records where its bytes lie in the file. The
// stripped message (kilobytes) is parsed as usual and each initializer's tensor is made over
// its bytes in the mapping (tensor_in_file).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lathe::onnx_import {

struct ByteRange {
  size_t offset = 0, size = 0;
};

struct StrippedModel {
  std::string bytes;                             // the model without the large raw_data fields
  std::vector<std::optional<ByteRange>> raw;     // per initializer, in order: its raw_data in the file
};

// raw_data fields of at least this many bytes are left in the file.
constexpr size_t kStripBytes = 4096;

// nullopt when the bytes are not well-formed wire format; then *problem (when given) says
// where, naming the node or initializer the file breaks off in ("the file ends inside
// initializer 3 'fc.weight': its raw_data declares 4096 bytes, 1000 remain"), and the
// caller parses the file as it is so that protobuf's own checks decide.
std::optional<StrippedModel> strip_weights(const uint8_t* data, size_t size, std::string* problem = nullptr);

}  // namespace lathe::onnx_import
