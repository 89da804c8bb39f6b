// Text every window shares: how to read it, what to do without a run, problems.
#include <algorithm>
#include <string>
#include <vector>

#include <imgui.h>

#include "app/gui/windows.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::gui {

void how_to_read(const char* text) {
  if (ImGui::CollapsingHeader("How to read this")) ImGui::TextWrapped("%s", text);
}

void error_text(const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.35f, 0.35f, 1));
  ImGui::TextWrapped("%s", text.c_str());
  ImGui::PopStyleColor();
}

bool hardware_combo(const char* label, std::vector<std::string>* names, int* chosen) {
  if (names->empty()) {
    *names = profiling::hardware_profile_names();
    for (size_t i = 0; i < names->size(); ++i) {
      if ((*names)[i] == "8xH100") *chosen = static_cast<int>(i);
    }
  }
  if (names->empty()) return false;
  *chosen = std::clamp(*chosen, 0, static_cast<int>(names->size()) - 1);
  if (ImGui::BeginCombo(label, (*names)[*chosen].c_str())) {
    for (size_t i = 0; i < names->size(); ++i) {
      if (ImGui::Selectable((*names)[i].c_str(), static_cast<int>(i) == *chosen))
        *chosen = static_cast<int>(i);
    }
    ImGui::EndCombo();
  }
  return true;
}

LoadedRun* run_or_hint(GuiSession& session) {
  LoadedRun* run = session.current_run();
  if (run == nullptr) {
    ImGui::TextWrapped(
        "No run yet. Start one in Launch, or open a trace (File > Open, or `shardscope view "
        "FILE`).");
  }
  return run;
}

}  // namespace shardscope::gui
