// screenshot.h — writing the current OpenGL back buffer to a PNG (for --screenshot).
//
// Call after rendering a frame and before swapping buffers: glReadPixels(GL_BACK), flip
// rows (OpenGL's origin is bottom-left), stbi_write_png. Works under Xvfb with Mesa.
#pragma once
#include <string>

namespace lathe::views {

// Returns "" on success, else what went wrong.
std::string write_back_buffer_png(const std::string& path, int width, int height);

}  // namespace lathe::views
