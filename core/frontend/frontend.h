// frontend.h — the whole C++ frontend in one include: the lazy Tensor and its elementwise,
// reduction and shape composites (tensor.h), the neural-network composites (nn.h),
// reverse-mode autodiff and SGD (autodiff.h) and the sample/bench graph builders
// (samples.h).
#pragma once
#include "core/frontend/autodiff.h"
#include "core/frontend/nn.h"
#include "core/frontend/samples.h"
#include "core/frontend/tensor.h"
