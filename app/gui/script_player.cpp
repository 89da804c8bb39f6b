#include "app/gui/script_player.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>

#include <imgui.h>

#include "app/gui/gui_session.h"
#include "app/gui/windows.h"

namespace shardscope::gui {
namespace {

// Bounds of a script's counts: a rank, run, event or step index; nodes of a projection; frames to
// wait (a minute at 60 frames a second: `frames 100000` once held the app for half an hour).
constexpr int kMostIndex = 1 << 24, kMostNodes = 4096, kMostFrames = 3600;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string tab_named(const std::string& name) {
  const std::string want = lower(name);
  for (const char* tab : kTabs) {
    const std::string t = lower(tab);
    if (t == want || (want == "sync" && t == "weight sync") || (want == "whatif" && t == "what-if"))
      return tab;
  }
  throw std::runtime_error("no tab named '" + name +
                           "' (launch, timeline, memory, sync, compare, what-if)");
}

void ScriptPlayer::before_frame(GuiSession& session) {
  ImGuiIO& io = ImGui::GetIO();
  io.MousePos = ImVec2(mouse_x_, mouse_y_);
  for (int b = 0; b < 2; ++b) io.MouseDown[b] = down_[b];
  if (!pending_moves_.empty()) {
    auto [x, y, button, press] = pending_moves_.front();
    pending_moves_.erase(pending_moves_.begin());
    mouse_x_ = x;
    mouse_y_ = y;
    io.MousePos = ImVec2(x, y);
    if (button >= 0) down_[button] = press;
    for (int b = 0; b < 2; ++b) io.MouseDown[b] = down_[b];
    return;
  }
  if (wheel_ != 0) {
    io.MouseWheel += wheel_;
    wheel_ = 0;
    return;
  }
  if (held_key_ != 0) {
    io.KeysDown[held_key_] = false;
    io.KeyCtrl = false;
    held_key_ = 0;
    return;
  }
  if (!pending_keys_.empty()) {
    held_key_ = pending_keys_.front();
    pending_keys_.erase(pending_keys_.begin());
    io.KeyCtrl = pending_ctrl_.front();
    pending_ctrl_.erase(pending_ctrl_.begin());
    io.KeysDown[held_key_] = true;
    return;
  }
  if (wait_frames_ > 0) {
    --wait_frames_;
    return;
  }
  if (waiting_live_) {
    if (session.live_index < 0) {
      if (session.launches.idle()) {
        error_ = "wait-live: no run is running";
        waiting_live_ = false;
      }
      return;
    }
    waiting_live_ = false;
    return;
  }
  if (waiting_runs_) {
    if (!session.launches.idle()) return;
    waiting_runs_ = false;
    wait_frames_ = 2;  // let the finished run arrive
    return;
  }
  if (next_ >= actions_.size()) return;
  const ScriptAction& a = actions_[next_++];
  try {
    apply(a, session);
  } catch (const std::exception& e) {
    error_ = "script line " + std::to_string(a.line) + " (" + a.verb + "): " + e.what();
    next_ = actions_.size();
  }
}

double ScriptPlayer::number(const std::string& s) {
  constexpr double kLargest = 1e9;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size() || !std::isfinite(v) || std::fabs(v) > kLargest)
    throw std::runtime_error("expected a finite number of magnitude at most 1e9, got '" + s + "'");
  return v;
}

int ScriptPlayer::whole(const std::string& s, int lo, int hi) {
  double v = 0.5;
  try {
    v = number(s);
  } catch (const std::runtime_error&) {
    // said below, with the range this count takes
  }
  if (v != std::floor(v) || v < lo || v > hi) {
    throw std::runtime_error("expected a whole number from " + std::to_string(lo) + " to " +
                             std::to_string(hi) + ", got '" + s + "'");
  }
  return static_cast<int>(v);
}

void ScriptPlayer::move_onto_event(GuiSession& session, const ScriptAction& a, bool click) {
  LoadedRun* run = session.current_run();
  if (run == nullptr) throw std::runtime_error("no run is loaded");
  const int k = a.args.size() > 2 ? whole(a.args[2], 0, kMostIndex) : 0;
  const ShownRun view = session.shown(*run);
  const EventRef ref =
      TimelineView::find_event(*view.trace, whole(a.args[0], 0, kMostIndex), a.args[1], k);
  if (!ref.valid()) throw std::runtime_error("no event '" + a.args[1] + "' #" + std::to_string(k));
  float x = 0, y = 0;
  if (!session.timeline.screen_position(*view.index, ref, &x, &y)) {
    throw std::runtime_error("event '" + a.args[1] +
                             "' is not on screen (zoom or select the Timeline tab)");
  }
  pending_moves_.push_back({x, y, -1, false});
  if (click) {
    pending_moves_.push_back({x, y, 0, true});
    pending_moves_.push_back({x, y, 0, false});
  }
  wait_frames_ = 2;  // hover shows in the next frames
}

// mouse, click, drag, wheel and key: what a person does with the mouse and keyboard, queued for
// the frames to come. Returns false for any other verb.
bool ScriptPlayer::apply_pointer(const ScriptAction& a) {
  const auto& v = a.verb;
  const auto& args = a.args;
  if (v == "mouse") {
    pending_moves_.push_back({float(number(args[0])), float(number(args[1])), -1, false});
  } else if (v == "click") {
    const float x = float(number(args[0])), y = float(number(args[1]));
    pending_moves_.push_back({x, y, -1, false});
    pending_moves_.push_back({x, y, 0, true});
    pending_moves_.push_back({x, y, 0, false});
  } else if (v == "drag") {
    const int button = args.size() > 4 && args[4] == "right" ? 1 : 0;
    const float x0 = float(number(args[0])), y0 = float(number(args[1]));
    const float x1 = float(number(args[2])), y1 = float(number(args[3]));
    pending_moves_.push_back({x0, y0, -1, false});
    pending_moves_.push_back({x0, y0, button, true});
    for (int i = 1; i <= 6; ++i) {
      pending_moves_.push_back({x0 + (x1 - x0) * i / 6, y0 + (y1 - y0) * i / 6, -1, false});
    }
    pending_moves_.push_back({x1, y1, button, false});
  } else if (v == "wheel") {
    pending_moves_.push_back({float(number(args[0])), float(number(args[1])), -1, false});
    wheel_ = float(number(args[2]));
  } else if (v == "key") {
    // key W | S | A | D | F | N | P | Escape: what a person presses over the timeline;
    // Ctrl+Plus | Ctrl+Minus | Ctrl+0: the text size, anywhere.
    // The platform's key codes, as Dear ImGui 1.86 reads them (GLFW's letters are ASCII).
    const std::map<std::string, int> keys = {
        {"W", 'W'},         {"S", 'S'},
        {"A", 'A'},         {"D", 'D'},
        {"F", 'F'},         {"N", 'N'},
        {"P", 'P'},         {"Escape", ImGui::GetKeyIndex(ImGuiKey_Escape)},
        {"Ctrl+Plus", '='}, {"Ctrl+Minus", '-'},
        {"Ctrl+0", '0'}};
    auto key = keys.find(args[0]);
    if (key == keys.end() || key->second <= 0)
      throw std::runtime_error("key: W, S, A, D, F, N, P, Escape, Ctrl+Plus, Ctrl+Minus or Ctrl+0");
    pending_keys_.push_back(key->second);
    pending_ctrl_.push_back(args[0].rfind("Ctrl+", 0) == 0);
    wait_frames_ = 2;
  } else {
    return false;
  }
  return true;
}

// fold R / pin R: what a click / Shift+click on rank R's name does.
void ScriptPlayer::toggle_rank(GuiSession& session, const std::string& v, const std::string& rank) {
  const LoadedRun* run = session.current_run();
  const int wanted = whole(rank, 0, kMostIndex);
  int index = -1;
  for (size_t r = 0; run != nullptr && r < run->trace.ranks.size(); ++r)
    if (run->trace.ranks[r].rank == wanted) index = static_cast<int>(r);
  if (index < 0) throw std::runtime_error(v + ": no rank " + rank + " in the open run");
  if (v == "fold") {
    session.timeline.toggle_folded(index);
  } else {
    session.timeline.toggle_pinned(index);
  }
  wait_frames_ = 1;
}

// project [HARDWARE [SCALE [PRECISION]]]: the What-if tab's projection of the open run.
void ScriptPlayer::request_projection(GuiSession& session, const std::vector<std::string>& args) {
  session.requested_tab = "What-if";
  if (!args.empty()) {
    auto& names = session.what_if.hardware_names;
    auto it = std::find(names.begin(), names.end(), args[0]);
    if (names.empty() || it == names.end()) {
      // Names are listed on the What-if tab's first frame; try again after it.
      if (!retried_) {
        retried_ = true;
        --next_;
        wait_frames_ = 1;
        return;
      }
      throw std::runtime_error("no hardware profile '" + args[0] + "'");
    }
    session.what_if.hardware = static_cast<int>(it - names.begin());
  }
  if (args.size() > 1) {
    const double scale = number(args[1]);
    if (scale != 0 && !(scale >= 1e-6 && scale <= 1e6))
      throw std::runtime_error("project: a compute scale is 0 (calibrated) or 1e-6 to 1e6");
    session.what_if.compute_scale = static_cast<float>(scale);
  }
  if (args.size() > 2) {
    if (args[2] != "fp32" && args[2] != "bf16")
      throw std::runtime_error("project: precision must be fp32 or bf16, got '" + args[2] + "'");
    session.what_if.price_fp32 = args[2] == "fp32";
  }
  retried_ = false;
  session.what_if.project_requested = true;
  wait_frames_ = 1;
}

void ScriptPlayer::apply(const ScriptAction& a, GuiSession& session) {
  const auto& v = a.verb;
  const auto& args = a.args;
  if (v == "open") {
    if (!session.open_trace(args[0])) throw std::runtime_error(session.message);
  } else if (v == "save") {
    if (!session.save_trace(args[0])) throw std::runtime_error(session.message);
  } else if (v == "tab") {
    session.requested_tab = tab_named(args[0]);
    wait_frames_ = 1;
  } else if (v == "run-select") {
    session.select_run(whole(args[0], 0, kMostIndex));
  } else if (v == "range") {
    session.timeline.request_range(number(args[0]), number(args[1]));
  } else if (v == "measure") {
    session.timeline.request_measure(number(args[0]), number(args[1]));
    wait_frames_ = 1;
  } else if (v == "lens") {
    // lens measured | lens device [HARDWARE]
    analysis::Lens lens;
    if (args.empty() || (args[0] != "measured" && args[0] != "device"))
      throw std::runtime_error("lens: measured or device [HARDWARE]");
    lens.measured = args[0] == "measured";
    if (args.size() > 1) lens.hardware = args[1];
    session.set_lens(lens);
  } else if (v == "fit") {
    session.timeline.request_fit_all();
  } else if (v == "fit-step") {
    session.timeline.request_fit_step(whole(args[0], 0, kMostIndex));
  } else if (v == "search") {
    session.timeline.search = args.empty() ? "" : args[0];
  } else if (apply_pointer(a)) {
  } else if (v == "hover" || v == "select") {
    move_onto_event(session, a, v == "select");
  } else if (v == "fold" || v == "pin") {
    toggle_rank(session, v, args[0]);
  } else if (v == "set") {
    set_launch_field(session, args[0], args[1]);
  } else if (v == "project-config") {  // HARDWARE [NODES]: the Launch form's configuration
    const int nodes = args.size() > 1 ? whole(args[1], 1, kMostNodes) : 1;
    if (!project_launch_form(session, args[0], nodes)) throw std::runtime_error(session.message);
  } else if (v == "run") {
    if (!start_launch(session)) throw std::runtime_error(session.message);
  } else if (v == "wait-runs") {
    waiting_runs_ = true;
  } else if (v == "wait-live") {
    waiting_live_ = true;
  } else if (v == "stop") {
    session.launches.stop_all();
  } else if (v == "resume") {
    session.message =
        "queued #" + std::to_string(session.launches.resume(whole(args[0], 0, kMostIndex)));
  } else if (v == "project") {
    request_projection(session, args);
  } else if (v == "frames") {
    wait_frames_ = whole(args[0], 0, kMostFrames);
  } else if (v == "screenshot") {
    screenshot_ = args[0];
  } else if (v == "state") {
    std::ofstream(args[0]) << session.state().dump(2) << "\n";
  }
}

}  // namespace shardscope::gui
