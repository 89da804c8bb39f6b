#include "app/gui/screenshot.h"

#include <cstdint>
#include <vector>

#include <GL/gl.h>
#include <stb/stb_image_write.h>

namespace shardscope::gui {

bool write_framebuffer_png(const std::string& path, int width, int height, std::string* why) {
  if (width <= 0 || height <= 0) {
    *why = "the window has no pixels to capture";
    return false;
  }
  std::vector<uint8_t> pixels(size_t(width) * height * 3);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, pixels.data());
  // OpenGL's rows run bottom-up; PNG's top-down.
  stbi_flip_vertically_on_write(1);
  if (!stbi_write_png(path.c_str(), width, height, 3, pixels.data(), width * 3)) {
    *why = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace shardscope::gui
