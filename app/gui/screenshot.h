#pragma once

#include <string>

namespace shardscope::gui {

// Reads the current OpenGL framebuffer (the frame just rendered, before it is swapped) and writes
// it as a PNG; false with `why` set when it cannot.
bool write_framebuffer_png(const std::string& path, int width, int height, std::string* why);

}  // namespace shardscope::gui
