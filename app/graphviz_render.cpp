// graphviz_render.cpp — libgvc rendering: agmemread → gvLayout("dot") → gvRenderData.
#include "app/graphviz_render.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>

#include "core/ir/diag.h"

namespace lathe::app {

namespace {

std::mutex& graphviz_mutex() {
  static std::mutex m;
  return m;
}

// Graphviz's own messages ("syntax error in line 2") are collected here while the mutex is
// held, and become part of the UserError instead of going to stderr.
std::string& graphviz_messages() {
  static std::string m;
  return m;
}
int collect_message(char* text) {
  graphviz_messages() += text ? text : "";
  return 0;
}

std::string with_details(std::string msg) {
  std::string d = graphviz_messages();
  while (!d.empty() && (d.back() == '\n' || d.back() == ' ')) d.pop_back();
  return d.empty() ? msg : msg + ": " + d;
}

// One context per process: creating it loads the plugins, which is the slow part.
GVC_t* context() {
  static GVC_t* gvc = gvContext();
  return gvc;
}

}  // namespace

std::string render_dot(const std::string& dot, const std::string& format) {
  std::lock_guard<std::mutex> lock(graphviz_mutex());
  graphviz_messages().clear();
  agusererrf previous = agseterrf(collect_message);
  struct Restore {
    agusererrf f;
    ~Restore() { agseterrf(f); }
  } restore{previous};
  GVC_t* gvc = context();
  if (!gvc) throw UserError("cannot start Graphviz (gvContext failed)");
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> g(agmemread(dot.c_str()), agclose);
  if (!g) throw UserError(with_details("Graphviz could not read the DOT text"));
  if (gvLayout(gvc, g.get(), "dot") != 0) throw UserError(with_details("Graphviz layout failed"));
  char* data = nullptr;
  unsigned int length = 0;
  int rc = gvRenderData(gvc, g.get(), format.c_str(), &data, &length);
  gvFreeLayout(gvc, g.get());
  if (rc != 0 || !data) {
    if (data) gvFreeRenderData(data);
    throw UserError(with_details("Graphviz cannot render the format '" + format + "'"));
  }
  std::string out(data, length);
  gvFreeRenderData(data);
  return out;
}

void render_dot_to_file(const std::string& dot, const std::string& format, const std::string& path) {
  std::string bytes = render_dot(dot, format);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw UserError("cannot write " + path + ": " + std::strerror(errno));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw UserError("cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace lathe::app
