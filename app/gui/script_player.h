#pragma once

#include <string>
#include <utility>
#include <vector>

#include "app/gui/gui_script.h"

namespace shardscope::gui {

struct GuiSession;

// The app's tabs, in order.
inline constexpr const char* kTabs[] = {"Launch",  "Timeline", "Memory", "Weight sync",
                                        "Experts", "Compare",  "What-if"};

// The tab a script or flag names: any case, "sync" and "whatif" accepted. Throws
// std::runtime_error listing the tabs for any other name.
std::string tab_named(const std::string& name);

// Replays a script (gui_script.h) one action at a time, feeding mouse input to ImGui as a
// person would, and waiting where an action needs frames (a hover, a run to finish).
class ScriptPlayer {
 public:
  explicit ScriptPlayer(std::vector<ScriptAction> actions) : actions_(std::move(actions)) {}
  bool done() const {
    return next_ >= actions_.size() && wait_frames_ == 0 && !waiting_runs_ && !waiting_live_;
  }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  std::string take_screenshot_request() { return std::exchange(screenshot_, ""); }

  // Before ImGui::NewFrame: advance and set this frame's input.
  void before_frame(GuiSession& session);

 private:
  struct Move {
    float x, y;
    int button;  // -1: none
    bool press;
  };

  // A script's number: finite and of magnitude at most 1e9 (a coordinate, a scale), or a whole
  // number within [lo, hi] (an index, a count); throws naming what it got.
  static double number(const std::string& s);
  static int whole(const std::string& s, int lo, int hi);
  void move_onto_event(GuiSession& session, const ScriptAction& a, bool click);
  void apply(const ScriptAction& a, GuiSession& session);
  bool apply_pointer(const ScriptAction& a);
  void toggle_rank(GuiSession& session, const std::string& verb, const std::string& rank);
  void request_projection(GuiSession& session, const std::vector<std::string>& args);

  std::vector<ScriptAction> actions_;
  size_t next_ = 0;
  int wait_frames_ = 0;
  bool waiting_runs_ = false;
  bool waiting_live_ = false;
  bool retried_ = false;
  std::vector<Move> pending_moves_;
  // Keys to press, one a frame, each released the frame after (the platform's key codes).
  std::vector<int> pending_keys_;
  int held_key_ = 0;
  std::vector<bool> pending_ctrl_;  // with Ctrl held, one per pending key
  float mouse_x_ = -1, mouse_y_ = -1, wheel_ = 0;
  bool down_[2] = {false, false};
  std::string error_;
  std::string screenshot_;
};

}  // namespace shardscope::gui
