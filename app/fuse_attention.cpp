// fuse_attention.cpp — fused attention for imported models, by the `flash-attention` rules.
//
// Measured on the 2-core Zen 3 (llvm, one pool thread, CPU ms per run of 12 heads, T 128,
// d 64, 2 alternating rounds at load 8-9): causal attention (GPT-2's Where(causal, s, -inf))
// fused 0.74 / 1.19 ms vs 1.24 / 1.37 unfused (the tiles above the diagonal are skipped and
// the 128 x 128 scores never stored); BERT's padding mask (no causal skip) fused 1.36 / 1.63
// vs 1.07 / 1.09, and at the best tile (66x128x6) 1.06 / 1.20: no gain. So by default only
// a model whose every fused attention is causal keeps the rewrite.
#include "app/fuse_attention.h"

#include <cstdlib>

#include "core/ir/attention_op.h"
#include "core/ir/diag.h"
#include "core/rewrite/session.h"
#ifdef HAVE_LATHE_SCRIPTING
#include "scripting/engine.h"
#include "scripting/rules_lua.h"
#endif

namespace lathe::app {

Graph fuse_attention_on_load(const Graph& g, const std::string& backend, int* fused) {
  if (fused) *fused = 0;
  const char* e = std::getenv("LATHE_FLASH_ATTENTION");
  const std::string mode = e && *e ? e : "causal";
  if (mode == "0" || (!(e && *e) && backend == "cuda")) return g;
  if (mode != "causal" && mode != "all")
    throw UserError("LATHE_FLASH_ATTENTION='" + mode + "': expected causal (the default), all or 0");
#ifdef HAVE_LATHE_SCRIPTING
  // a model without a Softmax-like Exp2 has no attention to find: skip the Lua engine
  bool has_exp = false;
  for (NodeRef n : g.toposort()) has_exp |= n->op == Op::Exp2;
  if (!has_exp) return g;
  static script::Engine* engine = new script::Engine();  // rules call back into it: keep it alive
  RewriteSession s(g, script::load_rules_file(engine->L(), script::builtin_rules_path("flash-attention")), SessionOptions{});
  s.run();
  int n = 0;
  for (NodeRef node : s.graph().toposort()) {
    auto spec = attention_spec(node);
    if (!spec) continue;
    if (!spec->causal && mode == "causal") return g;
    ++n;
  }
  if (fused) *fused = n;
  return n > 0 ? s.graph() : g;
#else
  return g;
#endif
}

}  // namespace lathe::app
