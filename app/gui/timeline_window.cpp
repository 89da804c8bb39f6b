#include <imgui.h>

#include "app/gui/windows.h"

namespace shardscope::gui {

void draw_timeline_window(GuiSession& session) {
  LoadedRun* run = run_or_hint(session);
  if (run == nullptr) return;
  if (ImGui::CollapsingHeader("How to read this")) {
    ImGui::TextWrapped(
        "%s",
        "One group of rows per rank. host: what the rank's thread did (steps, micro-batches, "
        "forward in green, backward in blue, optimizer in purple); comm: collectives from issue to "
        "completion in orange, with a red underline where no compute hides them (exposed "
        "communication); memory: what the rank held. Yellow lines mark steps. Click a collective "
        "to link it across ranks: the rank that arrived last is the one the others waited for.");
    const char* note = strategy_teaching_note(run->row.strategy);
    if (*note) ImGui::TextWrapped("%s: %s", run->row.strategy.c_str(), note);
  }
  // The lens: device time (what N devices would do) by default, the wall clock one click away.
  const ShownRun view = session.shown(*run);
  ImGui::TextUnformatted(view.title.c_str());
  ImGui::SameLine();
  cli::Lens other = session.lens;
  other.measured = !session.lens.measured;
  if (ImGui::SmallButton(session.lens.measured ? "show device time" : "show measured wall clock"))
    session.set_lens(other);
  if (!view.note.empty())
    ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "%s", view.note.c_str());
  const int root = run->run.value("result", nlohmann::json::object()).value("failed_rank", -1);
  session.timeline.draw(*view.trace, *view.index, root);
}

}  // namespace shardscope::gui
