// load_model.h — the one load path of the commands that run a model or show its kernels:
// `lathe run` (so `lathe bench --models`), `lathe kernels` and `lathe tune`. The REPL's
// :load and the desktop app's open take the same decision through the same function
// (scripting/attention_on_load.h), as a rewrite session the user can step back through.
#pragma once
#include <string>

#include "core/ir/graph.h"

namespace lathe::app {

// FILE as load_graph reads it; an imported .onnx model then has its attention fused as
// LATHE_FLASH_ATTENTION says for `backend` (scripting/attention_on_load.h: by default only
// when every fused attention is causal, and not on cuda). `fused` (optional) gets how many
// attentions were fused.
Graph load_model(const std::string& file, const std::string& backend, int* fused = nullptr);

// "2 attentions fused at load, LATHE_FLASH_ATTENTION=0 for none" or "" when none was.
std::string fused_note(int fused);

}  // namespace lathe::app
