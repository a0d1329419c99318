// fuse_attention.h — the flash-attention rule set applied to an imported ONNX model by
// `lathe run` (and so `lathe bench --models`): see fuse_attention.cpp for when.
#pragma once
#include <string>

#include "core/ir/graph.h"

namespace lathe::app {

// g with its attention fused (Extern "attention") when LATHE_FLASH_ATTENTION allows:
// "causal" (the default) keeps the rewrite only if every fused attention is causal,
// "all" keeps any, "0" leaves g as it is. The default applies to the CPU backends only (the
// cuda FlashAttention kernel is untimed on hardware): with LATHE_FLASH_ATTENTION unset,
// backend "cuda" keeps g. `fused` (optional) gets how many were fused.
Graph fuse_attention_on_load(const Graph& g, const std::string& backend, int* fused = nullptr);

}  // namespace lathe::app
