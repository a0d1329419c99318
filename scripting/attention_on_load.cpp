// attention_on_load.cpp — fused attention for imported models (see attention_on_load.h).
#include "scripting/attention_on_load.h"

#include <lua.hpp>

#include <cstdlib>

#include "backends/backend.h"
#include "core/ir/attention_op.h"
#include "core/ir/diag.h"
#include "scripting/rules_lua.h"
#include "scripting/session_lua.h"

namespace lathe::script {

std::string flash_attention_mode(const std::string& backend) {
  const char* e = std::getenv("LATHE_FLASH_ATTENTION");
  if (!(e && *e)) return backend == "cuda" ? "0" : "causal";
  std::string mode = e;
  if (mode != "0" && mode != "causal" && mode != "all")
    throw UserError("LATHE_FLASH_ATTENTION='" + mode + "': expected causal (the default), all or 0");
  return mode;
}

AttentionFusion fuse_attention(lua_State* L, const Graph& g, const std::string& backend) {
  AttentionFusion r;
  r.mode = flash_attention_mode(backend);
  if (r.mode == "0") return r;
  // a model without a Softmax-like Exp2 has no attention to find: skip the rules
  bool has_exp = false;
  for (NodeRef n : g.toposort()) has_exp |= n->op == Op::Exp2;
  if (!has_exp) return r;
  Ruleset rules = load_rules_file(L, builtin_rules_path("flash-attention"));
  auto s = std::make_shared<RewriteSession>(g, rules, SessionOptions{});
  s->run();
  int n = 0;
  for (NodeRef node : s->graph().toposort()) {
    auto spec = attention_spec(node);
    if (!spec) continue;
    if (!spec->causal && r.mode == "causal") return r;
    ++n;
  }
  if (n == 0) return r;
  r.fused = n;
  r.session = std::move(s);
  r.rules = std::move(rules);
  return r;
}

int l_fuse_attention(lua_State* L) {
  Graph& g = check_graph(L, 1);
  std::string backend = luaL_optstring(L, 2, default_backend().c_str());
  AttentionFusion f = fuse_attention(L, g, backend);
  if (!f.session) return 0;
  push_session(L, f.session);
  push_ruleset(L, f.rules);
  lua_pushinteger(L, f.fused);
  return 3;
}

}  // namespace lathe::script
