// screenshot.cpp — back buffer -> PNG (see screenshot.h).
#include "views/screenshot.h"

#define GL_GLEXT_PROTOTYPES
#include <GL/gl.h>
#include <stb_image_write.h>

#include <cstring>
#include <vector>

namespace lathe::views {

std::string write_back_buffer_png(const std::string& path, int width, int height) {
  if (width <= 0 || height <= 0) return "the window has no pixels (size " + std::to_string(width) + "x" + std::to_string(height) + ")";
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  if (GLenum err = glGetError(); err != GL_NO_ERROR) return "glReadPixels failed (GL error " + std::to_string(err) + ")";
  const size_t row = static_cast<size_t>(width) * 4;
  std::vector<unsigned char> tmp(row);
  for (int y = 0; y < height / 2; ++y) {
    unsigned char* a = pixels.data() + y * row;
    unsigned char* b = pixels.data() + (height - 1 - y) * row;
    std::memcpy(tmp.data(), a, row);
    std::memcpy(a, b, row);
    std::memcpy(b, tmp.data(), row);
  }
  for (size_t i = 3; i < pixels.size(); i += 4) pixels[i] = 255;   // opaque, whatever GL left in alpha
  if (!stbi_write_png(path.c_str(), width, height, 4, pixels.data(), static_cast<int>(row)))
    return "cannot write " + path;
  return "";
}

}  // namespace lathe::views
