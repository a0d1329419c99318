// npy.h — NumPy .npy files (format 1.0/2.0/3.0, little-endian, C order) for every Lathe
// dtype (bf16 is written as '<V2' with a 'bf16' note in the header? no: as uint16 bits
// under descr '<u2' is lossy in meaning, so bf16 is refused with a clear error).
#pragma once
#include <string>

#include "core/runtime/host_tensor.h"

namespace lathe {

HostTensor read_npy(const std::string& path);             // UserError on malformed files
void write_npy(const std::string& path, const HostTensor& t);  // UserError on I/O failure

}  // namespace lathe
