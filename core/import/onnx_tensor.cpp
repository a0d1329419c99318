// onnx_tensor.cpp — ONNX element types and TensorProto -> HostTensor, defensively.
#include "core/import/onnx_tensor.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/import/onnx_import.h"
#include "onnx/onnx-data.pb.h"

namespace lathe::onnx_import {

std::optional<DType> dtype_from_onnx(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::F32;
    case onnx::TensorProto::UINT8: return DType::U8;
    case onnx::TensorProto::INT8: return DType::I8;
    case onnx::TensorProto::INT16: return DType::I16;
    case onnx::TensorProto::INT32: return DType::I32;
    case onnx::TensorProto::INT64: return DType::I64;
    case onnx::TensorProto::BOOL: return DType::Bool;
    case onnx::TensorProto::FLOAT16: return DType::F16;
    case onnx::TensorProto::DOUBLE: return DType::F64;
    case onnx::TensorProto::BFLOAT16: return DType::BF16;
    case onnx::TensorProto::UINT16: return DType::U16;
    case onnx::TensorProto::UINT32: return DType::U32;
    case onnx::TensorProto::UINT64: return DType::U64;
    default: return std::nullopt;
  }
}

std::string onnx_type_name(int t) {
  if (onnx::TensorProto::DataType_IsValid(t) && t != 0) {
    std::string n = onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t));
    for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return n;
  }
  return "type #" + std::to_string(t);
}

DType require_dtype(int t, const std::string& what) {
  if (t == 0) throw UserError(what + ": element type is undefined");
  auto d = dtype_from_onnx(t);
  if (!d)
    throw OnnxUnsupported("unsupported ONNX dtype '" + onnx_type_name(t) + "' (" + what + ")" +
                          (t == onnx::TensorProto::STRING ? ": Lathe has no string tensors" : ""));
  return *d;
}

namespace {

// Copies n typed values from a repeated field into the tensor, converting per element.
template <class Field>
void fill_from(HostTensor& out, const Field& f, bool as_float) {
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (as_float) out.set_f64(i, static_cast<double>(f.Get(static_cast<int>(i))));
    else out.set_i64(i, static_cast<int64_t>(f.Get(static_cast<int>(i))));
  }
}

}  // namespace

HostTensor tensor_from_proto(const onnx::TensorProto& t, int64_t max_elements, const std::string& what,
                             const RawInFile* raw) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
    throw OnnxUnsupported(what + ": tensors stored in external data files are not supported");
  if (t.has_segment()) throw OnnxUnsupported(what + ": segmented tensors are not supported");
  DType dt = require_dtype(t.data_type(), what);
  std::vector<int64_t> dims;
  int64_t numel = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) throw UserError(what + ": negative dimension " + std::to_string(d));
    if (d > 0 && numel > max_elements / d)
      throw UserError(what + ": declared shape has more than " + std::to_string(max_elements) + " elements");
    numel *= d;
    dims.push_back(d);
  }
  if (numel > max_elements)
    throw UserError(what + ": declared shape has more than " + std::to_string(max_elements) + " elements");
  const size_t esize = dtype_size(dt);
  auto mismatch = [&](const std::string& field, size_t have, size_t want) {
    return UserError(what + ": " + field + " holds " + std::to_string(have) + " values but the dims " +
                     "declare " + std::to_string(want) + " (" + onnx_type_name(t.data_type()) + ")");
  };
  // Validate the data length before allocating the tensor.
  if (raw || t.has_raw_data()) {
    size_t have = raw ? raw->size : t.raw_data().size();
    size_t want = static_cast<size_t>(numel) * esize;
    if (have != want)
      throw UserError(what + ": raw_data has " + std::to_string(have) + " bytes but the dims " +
                      "declare " + std::to_string(numel) + " " + onnx_type_name(t.data_type()) + " elements (" +
                      std::to_string(want) + " bytes)");
    if (raw && raw->file && dt != DType::Bool) return tensor_in_file(raw->file, raw->offset, dt, dims);
    HostTensor out(dt, dims);
    const char* src = raw ? reinterpret_cast<const char*>(raw->base + raw->offset) : t.raw_data().data();
    if (want) std::memcpy(out.data(), src, want);
    if (dt == DType::Bool) {  // normalize bytes to 0/1
      auto* p = out.ptr<uint8_t>();
      for (int64_t i = 0; i < numel; ++i) p[i] = p[i] != 0;
    }
    return out;
  }
  size_t n = static_cast<size_t>(numel);
  switch (dt) {
    case DType::F32: {
      if (static_cast<size_t>(t.float_data_size()) != n) throw mismatch("float_data", t.float_data_size(), n);
      HostTensor out(dt, dims);
      if (n) std::memcpy(out.data(), t.float_data().data(), n * 4);
      return out;
    }
    case DType::F64: {
      if (static_cast<size_t>(t.double_data_size()) != n) throw mismatch("double_data", t.double_data_size(), n);
      HostTensor out(dt, dims);
      if (n) std::memcpy(out.data(), t.double_data().data(), n * 8);
      return out;
    }
    case DType::I64: {
      if (static_cast<size_t>(t.int64_data_size()) != n) throw mismatch("int64_data", t.int64_data_size(), n);
      HostTensor out(dt, dims);
      if (n) std::memcpy(out.data(), t.int64_data().data(), n * 8);
      return out;
    }
    case DType::U32:
    case DType::U64: {  // uint64_data
      if (static_cast<size_t>(t.uint64_data_size()) != n) throw mismatch("uint64_data", t.uint64_data_size(), n);
      HostTensor out(dt, dims);
      for (size_t i = 0; i < n; ++i) out.set_i64(static_cast<int64_t>(i), static_cast<int64_t>(t.uint64_data(static_cast<int>(i))));
      return out;
    }
    case DType::F16:
    case DType::BF16: {  // bit patterns in int32_data
      if (static_cast<size_t>(t.int32_data_size()) != n) throw mismatch("int32_data", t.int32_data_size(), n);
      HostTensor out(dt, dims);
      auto* p = out.ptr<uint16_t>();
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
      return out;
    }
    default: {  // bool, u8, u16, i8, i16, i32: int32_data
      if (static_cast<size_t>(t.int32_data_size()) != n) throw mismatch("int32_data", t.int32_data_size(), n);
      HostTensor out(dt, dims);
      fill_from(out, t.int32_data(), false);
      if (dt == DType::Bool)
        for (size_t i = 0; i < n; ++i) out.set_i64(static_cast<int64_t>(i), t.int32_data(static_cast<int>(i)) != 0);
      return out;
    }
  }
}

}  // namespace lathe::onnx_import

namespace lathe {

namespace {
std::string read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

OnnxValue sequence_value(const onnx::SequenceProto& s, const OnnxOptions& opt, const std::string& path) {
  OnnxValue v;
  v.sequence = true;
  if (s.elem_type() != onnx::SequenceProto::TENSOR)
    throw OnnxUnsupported(path + ": a sequence of non-tensors (elem_type " + std::to_string(s.elem_type()) + ")");
  for (int i = 0; i < s.tensor_values_size(); ++i)
    v.elements.push_back(onnx_import::tensor_from_proto(s.tensor_values(i), opt.max_elements,
                                                        path + " element " + std::to_string(i)));
  return v;
}
}  // namespace

HostTensor read_onnx_tensor(const std::string& path, const OnnxOptions& opt) {
  std::string bytes = read_file_bytes(path);
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) throw UserError(path + ": not a valid serialized ONNX TensorProto");
  return onnx_import::tensor_from_proto(t, opt.max_elements, path);
}

OnnxValue read_onnx_value(const std::string& path, OnnxValueKind kind, const OnnxOptions& opt) {
  if (kind == OnnxValueKind::Tensor) return OnnxValue{false, false, {read_onnx_tensor(path, opt)}};
  std::string bytes = read_file_bytes(path);
  if (kind == OnnxValueKind::Sequence) {
    onnx::SequenceProto s;
    if (!s.ParseFromString(bytes)) throw UserError(path + ": not a valid serialized ONNX SequenceProto");
    return sequence_value(s, opt, path);
  }
  onnx::OptionalProto o;
  if (!o.ParseFromString(bytes)) throw UserError(path + ": not a valid serialized ONNX OptionalProto");
  switch (o.elem_type()) {
    case onnx::OptionalProto::UNDEFINED: return OnnxValue{true, false, {}};
    case onnx::OptionalProto::TENSOR:
      return OnnxValue{false, false, {onnx_import::tensor_from_proto(o.tensor_value(), opt.max_elements, path)}};
    case onnx::OptionalProto::SEQUENCE: return sequence_value(o.sequence_value(), opt, path);
    default: throw OnnxUnsupported(path + ": an optional of elem_type " + std::to_string(o.elem_type()));
  }
}

}  // namespace lathe
