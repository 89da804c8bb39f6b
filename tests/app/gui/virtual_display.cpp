#include "tests/app/gui/virtual_display.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include <stb/stb_image.h>

namespace shardscope::test {

VirtualDisplay::VirtualDisplay() {
  if (const char* d = std::getenv("DISPLAY")) previous_display_ = d;
  // Xvfb picks a free display number itself and writes it to a pipe once it accepts clients
  // (-displayfd): choosing one here raced with GUI tests running beside this one, and the loser
  // drew on the winner's server until that went away. -noreset keeps the server up between the
  // app's windows within a test.
  int ready[2];
  if (::pipe(ready) != 0) {
    error_ = "pipe failed";
    return;
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    ::close(ready[0]);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    const std::string fd = std::to_string(ready[1]);
    ::execlp("Xvfb", "Xvfb", "-displayfd", fd.c_str(), "-screen", "0", "1920x1080x24", "-nolisten",
             "tcp", "-noreset", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(ready[1]);
  if (pid_ < 0) {
    ::close(ready[0]);
    error_ = "fork failed";
    return;
  }
  // The number arrives as text ending in a newline; the pipe closes without it if Xvfb dies.
  std::string number;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (number.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{ready[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[16];
    const ssize_t n = ::read(ready[0], buf, sizeof buf);
    if (n <= 0) break;
    number.append(buf, static_cast<size_t>(n));
  }
  ::close(ready[0]);
  if (number.find('\n') == std::string::npos) {
    error_ = "Xvfb did not start within 10 s (is the xvfb package installed?)";
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return;
  }
  number.erase(number.find('\n'));
  ::setenv("DISPLAY", (":" + number).c_str(), 1);
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
