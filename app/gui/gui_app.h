#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace shardscope::gui {

struct GuiOptions {
  std::vector<std::string> open_files;  // traces to load at start
  std::vector<std::string> open_job;    // one job's profiler files (one a rank), loaded as one run
  std::string screenshot;               // write a PNG of the last frame here, then exit
  int frames = 0;         // frames to render after the script (0: until the window is closed,
                          // or 3 when a screenshot or script is given)
  std::string script;     // a file of actions to replay (see gui_script.h)
  std::string state_out;  // write the GUI state as JSON here at the end
  std::string tab;        // the tab to show first
  bool measured = false;  // the measured wall clock instead of device time
  std::string hardware;   // device time's hardware profile (empty: the trace's default)
  int width = 1600, height = 900;
};

// Returns the exit code: 0, 1 when a scripted action failed, 2 when there is no display or the
// options are bad (with a message saying how to run headless).
int gui_main(const GuiOptions& options, std::ostream& out, std::ostream& err);

// Whether a display is reachable (X11 or Wayland); the message explains what to do otherwise.
bool have_display(std::string* why);

}  // namespace shardscope::gui
