// attention_on_load.h — the flash-attention rule set (assets/rules/flash-attention.lua) applied
// to an imported model loaded to be run or shown as kernels: the one place that decides, for
// `lathe run` (so `lathe bench --models`), `lathe kernels`, `lathe tune` (app/load_model.h),
// the REPL's :load and the desktop app's open (lathe.cmd._fuse_attention: a rewrite session
// s the user can step back through).
//
// Measured on the 2-core Zen 3 (llvm, one pool thread, CPU ms per run of 12 heads, T 128,
// d 64, 2 alternating rounds at load 8-9): causal attention (GPT-2's Where(causal, s, -inf))
// fused 0.74 / 1.19 ms vs 1.24 / 1.37 unfused (the tiles above the diagonal are skipped and
// the 128 x 128 scores never stored); BERT's padding mask (no causal skip) fused 1.36 / 1.63
// vs 1.07 / 1.09, and at the best tile (66x128x6) 1.06 / 1.20: no gain. So by default only
// a model whose every fused attention is causal keeps the rewrite.
#pragma once
#include <memory>
#include <string>

#include "core/ir/graph.h"
#include "core/rewrite/session.h"
#include "scripting/binding.h"

namespace lathe::script {

// LATHE_FLASH_ATTENTION as it applies on `backend`: "causal" (the default on the CPU
// backends: keep the rewrite only if every fused attention is causal), "all" (keep any),
// "0" (none; also the default on cuda, whose kernel is untimed on hardware). UserError for
// any other value.
std::string flash_attention_mode(const std::string& backend);

struct AttentionFusion {
  std::string mode;                          // flash_attention_mode(backend)
  int fused = 0;                             // attentions fused (0: the graph stays as loaded)
  std::shared_ptr<RewriteSession> session;   // the rules run to their fixpoint; null when fused == 0
  Ruleset rules;                             // the flash-attention set (its Lua functions live in L)
  const Graph& graph(const Graph& loaded) const { return session ? session->graph() : loaded; }
};

// The flash-attention rules run on g in L's sandbox, kept as LATHE_FLASH_ATTENTION says.
// A graph without an Exp2 (no softmax) is left alone without loading the rules.
AttentionFusion fuse_attention(lua_State* L, const Graph& g, const std::string& backend);

// lathe.cmd._fuse_attention(g [, backend]) -> s, rules, n  (nil when nothing is kept);
// backend defaults to default_backend().
int l_fuse_attention(lua_State* L);

}  // namespace lathe::script
