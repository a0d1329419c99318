// onnx_tensor.h — internal to core/import: ONNX element types and TensorProto decoding.
#pragma once
#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

#include "core/runtime/host_tensor.h"
#include "core/runtime/mapped_file.h"

namespace lathe::onnx_import {

// The Lathe dtype of an ONNX TensorProto.DataType, or nullopt (string, complex, uint16/32/64…).
std::optional<DType> dtype_from_onnx(int elem_type);
// "float", "int64", "string", … (for messages).
std::string onnx_type_name(int elem_type);
// Like dtype_from_onnx, but throws OnnxUnsupported naming `what` for types Lathe lacks.
DType require_dtype(int elem_type, const std::string& what);

// Decodes a TensorProto, checking everything a hostile file could get wrong: negative dims,
// an element count over max_elements (checked before allocating), raw_data or typed data
// whose length disagrees with the dims, external data, unsupported types.
// `raw`, when given, is the tensor's raw_data left out of the message (onnx_weights.h) at
// base + offset: in a mapped file, the tensor is made over those bytes without copying them;
// with no file (bytes in the caller's memory), they are copied.
struct RawInFile {
  std::shared_ptr<const MappedFile> file;
  const std::byte* base = nullptr;
  size_t offset = 0, size = 0;
};
HostTensor tensor_from_proto(const onnx::TensorProto& t, int64_t max_elements, const std::string& what,
                             const RawInFile* raw = nullptr);

}  // namespace lathe::onnx_import
