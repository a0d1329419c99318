// load_model.cpp — see load_model.h.
#include "app/load_model.h"

#include "core/ir/loader.h"
#ifdef HAVE_LATHE_SCRIPTING
#include "scripting/attention_on_load.h"
#include "scripting/engine.h"
#endif

namespace lathe::app {

namespace {

bool is_onnx(const std::string& file) { return file.size() > 5 && file.compare(file.size() - 5, 5, ".onnx") == 0; }

Graph fuse_attention_on_load(const Graph& g, const std::string& backend, int* fused) {
#ifdef HAVE_LATHE_SCRIPTING
  static script::Engine* engine = new script::Engine();  // rules call back into it: keep it alive
  script::AttentionFusion f = script::fuse_attention(engine->L(), g, backend);
  if (fused) *fused = f.fused;
  return f.graph(g);
#else
  (void)backend, (void)fused;
  return g;
#endif
}

}  // namespace

Graph load_model(const std::string& file, const std::string& backend, int* fused) {
  if (fused) *fused = 0;
  Graph g = load_graph(file);
  return is_onnx(file) ? fuse_attention_on_load(g, backend, fused) : g;
}

std::string fused_note(int fused) {
  if (fused <= 0) return "";
  return std::to_string(fused) + (fused == 1 ? " attention" : " attentions") + " fused at load, LATHE_FLASH_ATTENTION=0 for none";
}

}  // namespace lathe::app
