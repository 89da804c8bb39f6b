#include "app/gui/gui_app.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#define GL_SILENCE_DEPRECATION
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include "app/analysis/trace_open.h"
#include "app/gui/gui_script.h"
#include "app/gui/gui_session.h"
#include "app/gui/gui_style.h"
#include "app/gui/screenshot.h"
#include "app/gui/script_player.h"
#include "app/gui/windows.h"
#include "profiling/io/input_file.h"
#include "profiling/io/trace_io.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::gui {

namespace {

// Ctrl + / Ctrl - / Ctrl 0, wherever the pointer is: the text size of the whole app.
void text_size_keys(GuiSession& session) {
  const ImGuiIO& io = ImGui::GetIO();
  if (!io.KeyCtrl) return;
  if (ImGui::IsKeyPressed(GLFW_KEY_EQUAL) || ImGui::IsKeyPressed(GLFW_KEY_KP_ADD))
    session.change_text_scale(0.25f);
  if (ImGui::IsKeyPressed(GLFW_KEY_MINUS) || ImGui::IsKeyPressed(GLFW_KEY_KP_SUBTRACT))
    session.change_text_scale(-0.25f);
  if (ImGui::IsKeyPressed(GLFW_KEY_0)) session.change_text_scale(1.0f - session.text_scale);
}

void draw_frame(GuiSession& session, GLFWwindow* window) {
  text_size_keys(session);
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
    if (ImGui::BeginMenu("View")) {
      float percent = session.text_scale * 100;
      ImGui::SetNextItemWidth(scaled(200));
      if (ImGui::SliderFloat("text size", &percent, GuiSession::kMinTextScale * 100,
                             GuiSession::kMaxTextScale * 100, "%.0f %%"))
        session.change_text_scale(percent / 100 - session.text_scale);
      ImGui::TextDisabled("Ctrl + and Ctrl - change it, Ctrl 0 resets it");
      ImGui::EndMenu();
    }
    ImGui::SetNextItemWidth(scaled(360));
    LoadedRun* current = session.current_run();
    if (ImGui::BeginCombo("run", current ? current->label.c_str() : "(no run loaded)")) {
      for (size_t i = 0; i < session.runs.size(); ++i) {
        if (ImGui::Selectable(session.runs[i]->label.c_str(), session.current == int(i)))
          session.select_run(static_cast<int>(i));
      }
      ImGui::EndCombo();
    }
    if (current != nullptr) {
      ImGui::TextDisabled("%s, %zu events", analysis::ranks_text(current->trace).c_str(),
                          current->trace.event_count());
      if (current->live) {
        ImGui::TextColored(ImVec4(1, 0.8f, 0.2f, 1), "RUNNING (the timeline grows)");
      } else if (current->trace.run.projected) {
        ImGui::TextDisabled("projected, not run");
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
      ImGui::TextUnformatted(
          "File (.json: Chrome trace JSON; anything else: the native format), a folder, or one "
          "job's profiler files separated by ';'");
      ImGui::SetNextItemWidth(scaled(480));
      ImGui::InputText("##path", path, sizeof(path));
      if (ImGui::Button("OK", ImVec2(scaled(100), 0))) {
        if (std::string(popup) == "Open trace") {
          session.open_trace(path);
        } else {
          session.save_trace(path);
        }
        ImGui::CloseCurrentPopup();
      }
      ImGui::SameLine();
      if (ImGui::Button("Cancel", ImVec2(scaled(100), 0))) ImGui::CloseCurrentPopup();
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
        if (t == "Experts") draw_experts_window(session);
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

namespace {

// What gui_main prepares before it opens a window: all of it checked, so that a bad option is
// reported whether or not there is a display.
struct StartUp {
  std::vector<ScriptAction> actions;
  std::string first_tab;
  std::vector<std::unique_ptr<LoadedRun>> opened;
};

bool read_script(const std::string& path, std::vector<ScriptAction>* actions, std::ostream& err) {
  try {
    *actions = read_script_file(path);
  } catch (const std::exception& e) {
    err << "error: --script: " << e.what() << "\n";
    return false;
  }
  return true;
}

// Checks the options and loads what they name; false (said on `err`) when one is bad input.
// Why `--state PATH` cannot be written at the end, found before the app starts: it once exited
// 0 with no file and no word.
std::string state_path_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::symlink_status(path, ec);
  if (fs::exists(status) && !fs::is_regular_file(status))
    return path + " is not a regular file (an output replaces what is at its path)";
  const fs::path parent = fs::path(path).parent_path();
  const std::string folder = parent.empty() ? "." : parent.string();
  if (!fs::is_directory(folder, ec)) return "no folder " + folder;
  if (access(folder.c_str(), W_OK) != 0) return "cannot write in " + folder;
  return "";
}

bool prepare(const GuiOptions& options, StartUp* start, std::ostream& err) {
  if (!options.script.empty() && !read_script(options.script, &start->actions, err)) return false;
  if (!options.state_out.empty()) {
    if (const std::string why = state_path_problem(options.state_out); !why.empty()) {
      err << "error: --state: " << why << "\n";
      return false;
    }
  }
  if (options.width < 320 || options.height < 240) {
    err << "error: --size: at least 320x240\n";
    return false;
  }
  try {
    if (!options.tab.empty()) start->first_tab = tab_named(options.tab);
  } catch (const std::exception& e) {
    err << "error: --tab: " << e.what() << "\n";
    return false;
  }
  if (!options.hardware.empty()) {
    try {
      profiling::load_hardware_profile(options.hardware);
    } catch (const std::exception& e) {
      err << "error: --hardware: " << e.what() << "\n";
      return false;
    }
  }
  // The files first: a file that is not a trace is the user's error to hear about, display or not.
  if (!options.open_job.empty()) {
    try {
      start->opened.push_back(make_loaded_run(analysis::open_trace_paths(options.open_job),
                                              job_label(options.open_job)));
    } catch (const std::exception& e) {
      err << "error: " << e.what() << "\n";
      return false;
    }
  }
  for (const auto& file : options.open_files) {
    try {
      start->opened.push_back(make_loaded_run(analysis::open_trace_path(file), file));
    } catch (const std::exception& e) {
      err << "error: " << e.what() << "\n";
      return false;
    }
  }
  return true;
}

// A screenshot, a script or a frame count: the app ends by itself, so it renders without
// waiting for vsync.
bool unattended(const GuiOptions& options) {
  return !options.screenshot.empty() || !options.script.empty() || options.frames > 0;
}

// The window with a current OpenGL 3 context, and ImGui on it; null (said on `err`) when the
// display cannot give one.
GLFWwindow* open_window(const GuiOptions& options, std::ostream& err) {
  std::string why;
  if (!have_display(&why)) {
    err << why << "\n";
    return nullptr;
  }
  glfwSetErrorCallback(
      [](int code, const char* text) { std::fprintf(stderr, "GLFW error %d: %s\n", code, text); });
  if (!glfwInit()) {
    err << "error: cannot open the display (GLFW failed to start); run headless with xvfb-run, see "
           "`shardscope gui --help`\n";
    return nullptr;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  GLFWwindow* window =
      glfwCreateWindow(options.width, options.height, "shardscope", nullptr, nullptr);
  if (window == nullptr) {
    glfwTerminate();
    err << "error: cannot create an OpenGL 3 window on this display\n";
    return nullptr;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(unattended(options) ? 0 : 1);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the same layout every start (and in tests)
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 130");
  return window;
}

void close_window(GLFWwindow* window) {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
}

// Launched runs that finished since the last frame replace their live snapshot, or are added.
void take_finished_launches(GuiSession& session) {
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
}

// The running run's timeline grows: a fresh snapshot twice a second.
void refresh_live_run(GuiSession& session) {
  if (glfwGetTime() - session.live_refreshed <= 0.5) return;
  session.live_refreshed = glfwGetTime();
  profiling::Trace live;
  int id = 0;
  if (!session.launches.live_trace(&live, &id) || live.event_count() == 0) return;
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

// The launches' progress as the state (and a script) reads it, taken once a frame.
void snapshot_launch_progress(GuiSession& session) {
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
}

// The main loop's own state, beside the session it shows.
struct FrameLoop {
  const GuiOptions& options;
  GLFWwindow* window;
  int frames_left;  // of an unattended run, once its script is done
  int exit_code = 0;
};

// Draws and shows one frame, writing the screenshots asked for; false when an unattended run
// has shown its last frame.
bool render_frame(GuiSession& session, ScriptPlayer& player, FrameLoop* loop, std::ostream& err) {
  const GuiOptions& options = loop->options;
  const bool unattended_run = unattended(options);
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  if (unattended_run) player.before_frame(session);
  {
    // The monitor's content scale (2 on a HiDPI display), read each frame: the window may move.
    float x = 1, y = 1;
    glfwGetWindowContentScale(loop->window, &x, &y);
    session.display_scale = std::max(1.0f, std::max(x, y));
    ImGui::GetIO().FontGlobalScale = session.display_scale * session.text_scale;
  }
  ImGui::NewFrame();
  draw_frame(session, loop->window);
  ImGui::Render();
  int w = 0, h = 0;
  glfwGetFramebufferSize(loop->window, &w, &h);
  glViewport(0, 0, w, h);
  glClearColor(0.08f, 0.08f, 0.09f, 1);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  std::string why;
  if (const std::string shot = player.take_screenshot_request(); !shot.empty()) {
    if (!write_framebuffer_png(shot, w, h, &why)) {
      err << "error: " << why << "\n";
      loop->exit_code = 1;
    }
  }
  if (unattended_run && player.done() && --loop->frames_left <= 0) {
    if (!options.screenshot.empty() && !write_framebuffer_png(options.screenshot, w, h, &why)) {
      err << "error: " << why << "\n";
      loop->exit_code = 1;
    }
    glfwSwapBuffers(loop->window);
    return false;
  }
  glfwSwapBuffers(loop->window);
  return true;
}

// The session from start to end: the loop, then what an unattended run reports. Its launches
// are stopped before it returns, and with it the session goes, while ImGui is still up.
int run_session(const GuiOptions& options, StartUp& start, GLFWwindow* window, std::ostream& out,
                std::ostream& err) {
  GuiSession session;
  session.lens.measured = options.measured;
  session.lens.hardware = options.hardware;
  for (auto& run : start.opened) session.add_run(std::move(run));
  if (!options.open_job.empty()) session.message = "opened " + job_label(options.open_job);
  if (!options.open_files.empty()) session.message = "opened " + options.open_files.back();
  session.requested_tab = !start.first_tab.empty() ? start.first_tab
                          : session.runs.empty()   ? "Launch"
                                                   : "Timeline";
  ScriptPlayer player(std::move(start.actions));
  FrameLoop loop{options, window, options.frames > 0 ? options.frames : 3, 0};
  while (loop.exit_code == 0 && !glfwWindowShouldClose(window)) {
    glfwPollEvents();
    take_finished_launches(session);
    refresh_live_run(session);
    snapshot_launch_progress(session);
    if (!render_frame(session, player, &loop, err)) break;
  }
  if (player.failed()) {
    // What the script asked cannot be done on what it opened: the user's input, as a malformed
    // script is at parse time.
    err << "error: " << player.error() << "\n";
    loop.exit_code = 2;  // bad input, as prepare() returns for a malformed script
  }
  if (!options.state_out.empty()) {
    std::ofstream state(options.state_out);
    state << session.state().dump(2) << "\n";
    if (!state.flush()) {
      err << "error: --state: cannot write " << options.state_out << "\n";
      if (loop.exit_code == 0) loop.exit_code = 1;
    }
  }
  if (!options.screenshot.empty() && loop.exit_code == 0)
    out << "screenshot written to " << options.screenshot << "\n";
  if (!session.launches.idle()) session.launches.stop_all();
  return loop.exit_code;
}

}  // namespace

int gui_main(const GuiOptions& options, std::ostream& out, std::ostream& err) {
  StartUp start;
  if (!prepare(options, &start, err)) return 2;
  GLFWwindow* window = open_window(options, err);
  if (window == nullptr) return 2;
  const int exit_code = run_session(options, start, window, out, err);
  close_window(window);
  return exit_code;
}

}  // namespace shardscope::gui
