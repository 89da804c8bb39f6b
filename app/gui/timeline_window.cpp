#include <imgui.h>

#include "app/gui/windows.h"
#include "engine/train/strategy_registry.h"

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
        "communication); per step: the step's overlap (the share of communication that compute "
        "hides) and exposed communication, and in a pipeline run the stage's bubble (hatched: "
        "where it waits for other stages) next to the formula (p-1)/(m+p-1); memory: what the "
        "rank held (hover for the bytes). Yellow lines mark steps, by their own numbers. Click a "
        "collective to link it across ranks: the rank that arrived last is the one the others "
        "waited for.");
    const std::string note = strategy_traits(run->row.strategy).teaching;
    if (!note.empty()) ImGui::TextWrapped("%s: %s", run->row.strategy.c_str(), note.c_str());
  }
  // The lens: device time (what N devices would do) by default, the wall clock one click away.
  const ShownRun view = session.shown(*run);
  ImGui::TextUnformatted(view.title.c_str());
  ImGui::SameLine();
  analysis::Lens other = session.lens;
  other.measured = !session.lens.measured;
  if (ImGui::SmallButton(session.lens.measured ? "show device time" : "show measured wall clock"))
    session.set_lens(other);
  if (!view.note.empty())
    ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "%s", view.note.c_str());
  const int root = run->trace.run.result ? run->trace.run.result->failed_rank : -1;
  session.timeline.set_bubble_formula(run->bubble_formula);
  session.timeline.set_live(run->live);
  session.timeline.draw(*view.trace, *view.index, root);
}

}  // namespace shardscope::gui
