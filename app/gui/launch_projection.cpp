// The Launch tab's projection (issue 34: "engineers who plan a cluster want this with pictures"):
// the configuration in the form, however big, projected onto a hardware profile without running
// it (analysis::project_configuration, as `shardscope project` with run flags): the step's
// breakdown, MFU and memory per GPU as text, and the step's timeline opened as a run.
#include <imgui.h>

#include <algorithm>

#include "app/analysis/configuration_projection.h"
#include "app/gui/gui_session.h"
#include "app/gui/windows.h"
#include "engine/train/config.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::gui {

bool project_launch_form(GuiSession& session) {
  auto& p = session.launch_projection;
  p.text.clear();
  p.error.clear();
  if (p.hardware_names.empty()) p.hardware_names = profiling::hardware_profile_names();
  if (p.hardware < 0 || p.hardware >= static_cast<int>(p.hardware_names.size())) {
    p.error = "no hardware profile chosen";
    return false;
  }
  try {
    // As `project` takes run flags: the form's keys, not checked for running here (a 175B
    // model on 64 GPUs is the point), priced in bf16 as a GPU would run it.
    Config config = config_from_json(session.launch_form);
    config.strategy_options.precision = "bf16";
    const auto hw = profiling::load_hardware_profile(p.hardware_names[p.hardware]);
    const analysis::ConfigurationProjection projection =
        analysis::project_configuration(config, hw, std::max(1, p.nodes));
    p.text = analysis::projection_text(projection);
    if (projection.trace.ranks.empty()) {
      // Too many passes to draw: the figures only.
      session.message = "projected onto " + hw.name + "; " + projection.undrawn;
      return true;
    }
    // The run's name says what it is: no run, a projection.
    session.add_run(make_loaded_run(
        projection.trace, config.strategy + " w" + std::to_string(config.world) +
                              " projected onto " + hw.name +
                              (p.nodes > 1 ? " x " + std::to_string(p.nodes) + " nodes" : "")));
    session.message = "projected onto " + hw.name;
    return true;
  } catch (const ConfigError& e) {
    p.error = e.what();
  } catch (const std::exception& e) {
    p.error = e.what();
  }
  session.message = "cannot project: " + p.error;
  return false;
}

bool project_launch_form(GuiSession& session, const std::string& hardware, int nodes) {
  auto& p = session.launch_projection;
  p.hardware_names = profiling::hardware_profile_names();
  const auto it = std::find(p.hardware_names.begin(), p.hardware_names.end(), hardware);
  if (it == p.hardware_names.end()) {
    p.error = "no hardware profile named " + hardware;
    session.message = "cannot project: " + p.error;
    return false;
  }
  p.hardware = static_cast<int>(it - p.hardware_names.begin());
  p.nodes = nodes;
  return project_launch_form(session);
}

void draw_launch_projection(GuiSession& session) {
  auto& p = session.launch_projection;
  ImGui::Separator();
  ImGui::TextDisabled("or project it onto real GPUs, without running it");
  ImGui::SetNextItemWidth(140);
  if (!hardware_combo("##projection hardware", &p.hardware_names, &p.hardware)) {
    ImGui::TextDisabled("no hardware profiles found");
    return;
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(80);
  ImGui::InputInt("nodes", &p.nodes);
  p.nodes = std::clamp(p.nodes, 1, 4096);
  ImGui::SameLine();
  if (ImGui::Button("Project") || p.requested) {
    p.requested = false;
    project_launch_form(session);
  }
  if (!p.error.empty()) error_text(p.error);
  if (p.text.empty()) return;
  // Wrapped at the panel's edge: the breakdown's reasons (what the data comm is, the memory by
  // category) run longer than the panel is wide, and their ends say the most.
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(p.text.c_str());
  ImGui::PopTextWrapPos();
}

}  // namespace shardscope::gui
