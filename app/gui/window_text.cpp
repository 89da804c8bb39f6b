// Text every window shares: how to read it, what to do without a run, problems.
#include <string>

#include <imgui.h>

#include "app/gui/windows.h"

namespace shardscope::gui {

void how_to_read(const char* text) {
  if (ImGui::CollapsingHeader("How to read this")) ImGui::TextWrapped("%s", text);
}

void error_text(const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.35f, 0.35f, 1));
  ImGui::TextWrapped("%s", text.c_str());
  ImGui::PopStyleColor();
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
