#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::test {

// An Xvfb server of its own for a GUI test (1920x1080, 24-bit), on a free display number;
// DISPLAY points at it while it lives.
class VirtualDisplay {
 public:
  VirtualDisplay();
  ~VirtualDisplay();
  VirtualDisplay(const VirtualDisplay&) = delete;
  VirtualDisplay& operator=(const VirtualDisplay&) = delete;
  bool ok() const { return pid_ > 0; }
  const std::string& error() const { return error_; }

 private:
  pid_t pid_ = -1;
  std::string error_;
  std::string previous_display_;
};

// An RGB image read from a PNG.
struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;
  bool load(const std::string& path);
  // Pixels of exactly this colour (0xAABBGGRR, alpha ignored) in the rectangle (whole image by
  // default).
  size_t count(uint32_t colour, int x0 = 0, int y0 = 0, int x1 = -1, int y1 = -1) const;
  size_t distinct_colours() const;
};

}  // namespace shardscope::test
