// fuse_attention.h — the flash-attention rule set applied to an imported ONNX model by
// `lathe run` (and so `lathe bench --models`): see fuse_attention.cpp for when.
#pragma once
#include <string>

#include "core/ir/graph.h"

namespace lathe::app {

// g with its attention fused (Extern "attention") when LATHE_FLASH_ATTENTION allows:
// "causal" (the default) keeps the rewrite only if every fused attention is causal,
// "all" keeps any, "0" leaves g as it is. `fused` (optional) gets how many were fused.
Graph fuse_attention_on_load(const Graph& g, int* fused = nullptr);

}  // namespace lathe::app
