#include "tests/app/gui/virtual_display.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include <stb/stb_image.h>

namespace shardscope::test {

namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

VirtualDisplay::VirtualDisplay() {
  if (const char* d = std::getenv("DISPLAY")) previous_display_ = d;
  int number = 90 + static_cast<int>(::getpid() % 400);
  for (int tries = 0; tries < 50; ++tries, ++number) {
    if (!exists("/tmp/.X11-unix/X" + std::to_string(number)) &&
        !exists("/tmp/.X" + std::to_string(number) + "-lock"))
      break;
  }
  const std::string display = ":" + std::to_string(number);
  pid_ = ::fork();
  if (pid_ == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execlp("Xvfb", "Xvfb", display.c_str(), "-screen", "0", "1920x1080x24", "-nolisten", "tcp",
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  if (pid_ < 0) {
    error_ = "fork failed";
    return;
  }
  const std::string socket = "/tmp/.X11-unix/X" + std::to_string(number);
  for (int i = 0; i < 200 && !exists(socket); ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      error_ = "Xvfb exited (is the xvfb package installed?)";
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!exists(socket)) {
    error_ = "Xvfb did not start within 10 s";
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return;
  }
  ::setenv("DISPLAY", display.c_str(), 1);
}

VirtualDisplay::~VirtualDisplay() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  if (previous_display_.empty()) {
    ::unsetenv("DISPLAY");
  } else {
    ::setenv("DISPLAY", previous_display_.c_str(), 1);
  }
}

bool Image::load(const std::string& path) {
  int channels = 0;
  unsigned char* data = stbi_load(path.c_str(), &width, &height, &channels, 3);
  if (data == nullptr) return false;
  rgb.assign(data, data + size_t(width) * height * 3);
  stbi_image_free(data);
  return true;
}

size_t Image::count(uint32_t colour, int x0, int y0, int x1, int y1) const {
  if (x1 < 0) x1 = width;
  if (y1 < 0) y1 = height;
  const unsigned char r = colour & 0xFF, g = (colour >> 8) & 0xFF, b = (colour >> 16) & 0xFF;
  size_t n = 0;
  for (int y = std::max(0, y0); y < std::min(height, y1); ++y) {
    for (int x = std::max(0, x0); x < std::min(width, x1); ++x) {
      const unsigned char* p = &rgb[(size_t(y) * width + x) * 3];
      n += p[0] == r && p[1] == g && p[2] == b;
    }
  }
  return n;
}

size_t Image::distinct_colours() const {
  std::set<uint32_t> seen;
  for (size_t i = 0; i + 2 < rgb.size(); i += 3) {
    seen.insert(rgb[i] | (rgb[i + 1] << 8) | (rgb[i + 2] << 16));
  }
  return seen.size();
}

}  // namespace shardscope::test
