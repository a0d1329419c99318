// compare.h — numeric comparison with tolerances, used by tests, checks and lathe.allclose.
#pragma once
#include <string>

#include "core/runtime/host_tensor.h"

namespace lathe {

struct Tolerance { double rtol, atol; };
// Default tolerance for comparing a backend/rewrite result with the interpreter.
Tolerance default_tolerance(DType dt);

// |a-b| <= atol + rtol*|b| elementwise (NaN matches NaN, inf matches same-signed inf);
// shapes must be equal. On failure *why (if given) says where and by how much.
bool allclose(const HostTensor& a, const HostTensor& b, double rtol, double atol, std::string* why = nullptr);

}  // namespace lathe
