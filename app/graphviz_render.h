// graphviz_render.h — DOT text to SVG/PNG (or any Graphviz output format) in process,
// through libgvc. Used by `lathe dot`; the GUI can reuse it (format "plain" or "json" gives
// the laid-out positions). Graphviz is not thread-safe: calls are serialized here.
#pragma once
#include <string>

namespace lathe::app {

// Lays out `dot` with the dot engine and returns the rendered bytes in `format`
// ("svg", "png", "pdf", "plain", "json" …). Throws UserError on bad DOT or an unknown format.
std::string render_dot(const std::string& dot, const std::string& format);
// Renders to `path` (written in full, or not at all on a rendering error).
void render_dot_to_file(const std::string& dot, const std::string& format, const std::string& path);

}  // namespace lathe::app
