#include "app/gui/gui_app.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#define GL_SILENCE_DEPRECATION
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include "app/gui/gui_script.h"
#include "app/gui/gui_session.h"
#include "app/gui/screenshot.h"
#include "app/gui/windows.h"
#include "app/trace_open.h"
#include "profiling/hardware_profile.h"
#include "profiling/trace_io.h"

namespace shardscope::gui {

namespace {

constexpr const char* kTabs[] = {"Launch",      "Timeline", "Memory",
                                 "Weight sync", "Compare",  "What-if"};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The tab a script or flag names: any case, "sync" and "whatif" accepted.
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

// Replays a script one action at a time, feeding mouse input to ImGui as a person would.
class ScriptPlayer {
 public:
  ScriptPlayer(std::vector<ScriptAction> actions) : actions_(std::move(actions)) {}
  bool done() const {
    return next_ >= actions_.size() && wait_frames_ == 0 && !waiting_runs_ && !waiting_live_;
  }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  std::string take_screenshot_request() { return std::exchange(screenshot_, ""); }

  // Before ImGui::NewFrame: advance and set this frame's input.
  void before_frame(GuiSession& session) {
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

 private:
  struct Move {
    float x, y;
    int button;  // -1: none
    bool press;
  };

  static double number(const std::string& s) {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size()) throw std::runtime_error("not a number: '" + s + "'");
    return v;
  }

  void move_onto_event(GuiSession& session, const ScriptAction& a, bool click) {
    LoadedRun* run = session.current_run();
    if (run == nullptr) throw std::runtime_error("no run is loaded");
    const int k = a.args.size() > 2 ? static_cast<int>(number(a.args[2])) : 0;
    const ShownRun view = session.shown(*run);
    const EventRef ref =
        TimelineView::find_event(*view.trace, static_cast<int>(number(a.args[0])), a.args[1], k);
    if (!ref.valid())
      throw std::runtime_error("no event '" + a.args[1] + "' #" + std::to_string(k));
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

  void apply(const ScriptAction& a, GuiSession& session) {
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
      session.select_run(static_cast<int>(number(args[0])));
    } else if (v == "range") {
      session.timeline.request_range(number(args[0]), number(args[1]));
    } else if (v == "lens") {
      // lens measured | lens device [HARDWARE]
      cli::Lens lens;
      if (args.empty() || (args[0] != "measured" && args[0] != "device"))
        throw std::runtime_error("lens: measured or device [HARDWARE]");
      lens.measured = args[0] == "measured";
      if (args.size() > 1) lens.hardware = args[1];
      session.set_lens(lens);
    } else if (v == "fit") {
      session.timeline.request_fit_all();
    } else if (v == "fit-step") {
      session.timeline.request_fit_step(static_cast<int>(number(args[0])));
    } else if (v == "search") {
      session.timeline.search = args.empty() ? "" : args[0];
    } else if (v == "mouse") {
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
    } else if (v == "hover" || v == "select") {
      move_onto_event(session, a, v == "select");
    } else if (v == "set") {
      set_launch_field(session, args[0], args[1]);
    } else if (v == "run") {
      if (!start_launch(session)) throw std::runtime_error(session.message);
    } else if (v == "wait-runs") {
      waiting_runs_ = true;
    } else if (v == "wait-live") {
      waiting_live_ = true;
    } else if (v == "stop") {
      session.launches.stop_all();
    } else if (v == "resume") {
      session.message = "queued #" + std::to_string(session.launches.resume(int(number(args[0]))));
    } else if (v == "project") {
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
      if (args.size() > 1) session.what_if.compute_scale = static_cast<float>(number(args[1]));
      retried_ = false;
      session.what_if.project_requested = true;
      wait_frames_ = 1;
    } else if (v == "frames") {
      wait_frames_ = std::max(0, static_cast<int>(number(args[0])));
    } else if (v == "screenshot") {
      screenshot_ = args[0];
    } else if (v == "state") {
      std::ofstream(args[0]) << session.state().dump(2) << "\n";
    }
  }

  std::vector<ScriptAction> actions_;
  size_t next_ = 0;
  int wait_frames_ = 0;
  bool waiting_runs_ = false;
  bool waiting_live_ = false;
  bool retried_ = false;
  std::vector<Move> pending_moves_;
  float mouse_x_ = -1, mouse_y_ = -1, wheel_ = 0;
  bool down_[2] = {false, false};
  std::string error_;
  std::string screenshot_;
};

void draw_frame(GuiSession& session, GLFWwindow* window) {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  ImGui::Begin("shardscope", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_MenuBar);
  static char path[512] = "";
  bool open_popup = false, save_popup = false;
  if (ImGui::BeginMenuBar()) {
    if (ImGui::BeginMenu("File")) {
      if (ImGui::MenuItem("Open trace...")) open_popup = true;
      if (ImGui::MenuItem("Save trace as...", nullptr, false, session.current_run() != nullptr))
        save_popup = true;
      if (ImGui::MenuItem("Quit")) glfwSetWindowShouldClose(window, 1);
      ImGui::EndMenu();
    }
    ImGui::SetNextItemWidth(360);
    LoadedRun* current = session.current_run();
    if (ImGui::BeginCombo("run", current ? current->label.c_str() : "(no run loaded)")) {
      for (size_t i = 0; i < session.runs.size(); ++i) {
        if (ImGui::Selectable(session.runs[i]->label.c_str(), session.current == int(i)))
          session.select_run(static_cast<int>(i));
      }
      ImGui::EndCombo();
    }
    if (current != nullptr) {
      ImGui::TextDisabled("%zu ranks, %zu events", current->trace.ranks.size(),
                          current->trace.event_count());
      if (current->live) {
        ImGui::TextColored(ImVec4(1, 0.8f, 0.2f, 1), "RUNNING (the timeline grows)");
      } else if (current->row.no_result) {
        // Another tool's trace, or one without our result: a trace to look at, not a failure.
        ImGui::TextDisabled("a trace without a shardscope result");
      } else if (!current->row.ok) {
        const std::string& f = current->row.failure;
        ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "FAILED: %s",
                           f.substr(0, f.find('\n')).c_str());
      }
    }
    ImGui::EndMenuBar();
  }
  if (open_popup) ImGui::OpenPopup("Open trace");
  if (save_popup) ImGui::OpenPopup("Save trace");
  for (const char* popup : {"Open trace", "Save trace"}) {
    if (ImGui::BeginPopupModal(popup, nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
      ImGui::TextUnformatted("File (.json: Chrome trace JSON; anything else: the native format)");
      ImGui::SetNextItemWidth(480);
      ImGui::InputText("##path", path, sizeof(path));
      if (ImGui::Button("OK", ImVec2(100, 0))) {
        if (std::string(popup) == "Open trace") {
          session.open_trace(path);
        } else {
          session.save_trace(path);
        }
        ImGui::CloseCurrentPopup();
      }
      ImGui::SameLine();
      if (ImGui::Button("Cancel", ImVec2(100, 0))) ImGui::CloseCurrentPopup();
      ImGui::EndPopup();
    }
  }

  const float status_height = ImGui::GetFrameHeightWithSpacing();
  ImGui::BeginChild("body", ImVec2(0, -status_height));
  if (ImGui::BeginTabBar("tabs")) {
    for (const char* tab : kTabs) {
      const ImGuiTabItemFlags flags =
          session.requested_tab == tab ? ImGuiTabItemFlags_SetSelected : ImGuiTabItemFlags_None;
      if (ImGui::BeginTabItem(tab, nullptr, flags)) {
        session.tab = tab;
        const std::string t = tab;
        if (t == "Launch") draw_launch_window(session);
        if (t == "Timeline") draw_timeline_window(session);
        if (t == "Memory") draw_memory_window(session);
        if (t == "Weight sync") draw_sync_window(session);
        if (t == "Compare") draw_compare_window(session);
        if (t == "What-if") draw_what_if_window(session);
        ImGui::EndTabItem();
      }
    }
    session.requested_tab.clear();
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  ImGui::TextDisabled("%s", session.message.c_str());
  ImGui::End();
}

}  // namespace

bool have_display(std::string* why) {
  const char* x11 = std::getenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  if ((x11 != nullptr && *x11) || (wayland != nullptr && *wayland)) return true;
  *why =
      "no display: DISPLAY and WAYLAND_DISPLAY are not set.\n"
      "  To use the app headless, run it under a virtual X server and let it write screenshots:\n"
      "    xvfb-run -a -s '-screen 0 1920x1080x24' shardscope gui --open TRACE --screenshot "
      "out.png\n"
      "  Everything else works without a display: shardscope run | bench | report | project "
      "(see shardscope --help).";
  return false;
}

int gui_main(const GuiOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<ScriptAction> actions;
  if (!options.script.empty()) {
    std::ifstream in(options.script);
    if (!in) {
      err << "error: --script: cannot read " << options.script << "\n";
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    try {
      actions = parse_script(text.str());
    } catch (const std::exception& e) {
      err << "error: --script: " << e.what() << "\n";
      return 2;
    }
  }
  if (options.width < 320 || options.height < 240) {
    err << "error: --size: at least 320x240\n";
    return 2;
  }
  std::string first_tab;
  try {
    if (!options.tab.empty()) first_tab = tab_named(options.tab);
  } catch (const std::exception& e) {
    err << "error: --tab: " << e.what() << "\n";
    return 2;
  }
  if (!options.hardware.empty()) {
    try {
      profiling::load_hardware_profile(options.hardware);
    } catch (const std::exception& e) {
      err << "error: --hardware: " << e.what() << "\n";
      return 2;
    }
  }
  // The files first: a file that is not a trace is the user's error to hear about, display or not.
  std::vector<std::unique_ptr<LoadedRun>> opened;
  for (const auto& file : options.open_files) {
    try {
      opened.push_back(make_loaded_run(cli::open_trace_path(file), file));
    } catch (const std::exception& e) {
      err << "error: " << e.what() << "\n";
      return 2;
    }
  }
  std::string why;
  if (!have_display(&why)) {
    err << why << "\n";
    return 2;
  }
  glfwSetErrorCallback(
      [](int code, const char* text) { std::fprintf(stderr, "GLFW error %d: %s\n", code, text); });
  if (!glfwInit()) {
    err << "error: cannot open the display (GLFW failed to start); run headless with xvfb-run, see "
           "`shardscope gui --help`\n";
    return 2;
  }
  const bool unattended =
      !options.screenshot.empty() || !options.script.empty() || options.frames > 0;
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  GLFWwindow* window =
      glfwCreateWindow(options.width, options.height, "shardscope", nullptr, nullptr);
  if (window == nullptr) {
    glfwTerminate();
    err << "error: cannot create an OpenGL 3 window on this display\n";
    return 2;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(unattended ? 0 : 1);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the same layout every start (and in tests)
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 130");

  int exit_code = 0;
  {
    GuiSession session;
    session.lens.measured = options.measured;
    session.lens.hardware = options.hardware;
    for (auto& run : opened) session.add_run(std::move(run));
    if (!options.open_files.empty()) session.message = "opened " + options.open_files.back();
    session.requested_tab = !first_tab.empty()     ? first_tab
                            : session.runs.empty() ? "Launch"
                                                   : "Timeline";
    ScriptPlayer player(std::move(actions));
    int frames_left = options.frames > 0 ? options.frames : 3;
    while (exit_code == 0 && !glfwWindowShouldClose(window)) {
      glfwPollEvents();
      for (auto& finished : session.launches.take_finished()) {
        auto run = make_loaded_run(std::move(finished.trace), "launched");
        run->origin = "#" + std::to_string(finished.id);
        if (session.live_index >= 0 && session.live_id == finished.id) {
          session.replace_run(session.live_index, std::move(run));
          session.select_run(session.live_index);
        } else {
          session.add_run(std::move(run));
        }
        session.live_index = session.live_id = -1;
        session.live_rank_steps.clear();
      }
      // The running run's timeline grows: a fresh snapshot twice a second.
      if (glfwGetTime() - session.live_refreshed > 0.5) {
        session.live_refreshed = glfwGetTime();
        profiling::Trace live;
        int id = 0;
        if (session.launches.live_trace(&live, &id) && live.event_count() > 0) {
          session.live_rank_steps.clear();
          for (const auto& rank : live.ranks) {
            int step = 0;
            for (const auto& e : rank.events) step = std::max(step, e.step + 1);
            session.live_rank_steps.push_back(step);
          }
          auto run = make_loaded_run(std::move(live), "launched");
          run->origin = "running #" + std::to_string(id);
          run->live = true;
          if (session.live_index >= 0 && session.live_id == id) {
            session.replace_run(session.live_index, std::move(run));
          } else {
            session.live_id = id;
            session.live_index = session.add_run(std::move(run));
          }
        }
      }
      session.launches_progress_snapshot.clear();
      for (const auto& p : session.launches.progress()) {
        session.launches_progress_snapshot.push_back({{"id", p.id},
                                                      {"label", p.label},
                                                      {"status", p.status},
                                                      {"step", p.step},
                                                      {"steps", p.steps},
                                                      {"failure", p.failure},
                                                      {"resumed_from", p.resumed_from},
                                                      {"checkpoint", p.checkpoint},
                                                      {"resumable", p.resumable()},
                                                      {"resumed_as", p.resumed_as}});
      }
      ImGui_ImplOpenGL3_NewFrame();
      ImGui_ImplGlfw_NewFrame();
      if (unattended) player.before_frame(session);
      ImGui::NewFrame();
      draw_frame(session, window);
      ImGui::Render();
      int w = 0, h = 0;
      glfwGetFramebufferSize(window, &w, &h);
      glViewport(0, 0, w, h);
      glClearColor(0.08f, 0.08f, 0.09f, 1);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
      if (const std::string shot = player.take_screenshot_request(); !shot.empty()) {
        if (!write_framebuffer_png(shot, w, h, &why)) {
          err << "error: " << why << "\n";
          exit_code = 1;
        }
      }
      if (unattended && player.done() && --frames_left <= 0) {
        if (!options.screenshot.empty() && !write_framebuffer_png(options.screenshot, w, h, &why)) {
          err << "error: " << why << "\n";
          exit_code = 1;
        }
        glfwSwapBuffers(window);
        break;
      }
      glfwSwapBuffers(window);
    }
    if (player.failed()) {
      err << "error: " << player.error() << "\n";
      exit_code = 1;
    }
    if (!options.state_out.empty())
      std::ofstream(options.state_out) << session.state().dump(2) << "\n";
    if (!options.screenshot.empty() && exit_code == 0)
      out << "screenshot written to " << options.screenshot << "\n";
    if (!session.launches.idle()) session.launches.stop_all();
  }
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return exit_code;
}

}  // namespace shardscope::gui
