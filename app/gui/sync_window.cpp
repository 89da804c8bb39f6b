#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "app/gui/gui_style.h"
#include "app/gui/line_chart.h"
#include "app/gui/loss_curves.h"
#include "app/gui/windows.h"

namespace shardscope::gui {

namespace {

// fp32 ranks that compute the same thing in the same order agree bitwise; the reference sums
// in another order, so it differs by rounding: seen up to ~1e-6 after a few steps on `tiny`.
constexpr double kMatchTolerance = 1e-4;

ImU32 cell_colour(double deviation) {
  if (deviation == 0) return 0xFF3CB44B;                // identical
  if (deviation <= kMatchTolerance) return 0xFF2E8A3A;  // matches to rounding
  return 0xFF3030D0;                                    // differs
}

void grid(const char* id, const profiling::RunResult& result,
          std::vector<double> profiling::WeightSyncRow::*values) {
  const std::vector<std::string>& groups = result.sync_groups;
  const int columns = static_cast<int>(groups.size()) + 1;
  if (!ImGui::BeginTable(id, columns, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
    return;
  }
  ImGui::TableSetupColumn("rank");
  for (const auto& g : groups) ImGui::TableSetupColumn(g.c_str());
  ImGui::TableHeadersRow();
  char buf[32];
  for (const auto& row : result.sync_ranks) {
    if ((row.*values).empty()) continue;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("rank %d", row.rank);
    for (const double d : row.*values) {
      ImGui::TableNextColumn();
      ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, cell_colour(d));
      if (d == 0) {
        std::snprintf(buf, sizeof(buf), "equal");
      } else {
        std::snprintf(buf, sizeof(buf), "%.1e", d);
      }
      ImGui::TextUnformatted(buf);
    }
  }
  ImGui::EndTable();
}

}  // namespace

void draw_sync_window(GuiSession& session) {
  LoadedRun* run = run_or_hint(session);
  if (run == nullptr) return;
  how_to_read(
      "Ranks that agree can all be wrong, so agreement is not the test: every strategy's full "
      "weights (gathered, for sharded strategies) are compared with one device trained on the "
      "same global batches. Each cell is the largest |difference| within a group of parameters: "
      "green when equal or within rounding, red when it differs.");
  if (!run->trace.run.result) {
    ImGui::TextWrapped(
        "This trace carries no shardscope result: another tool recorded it (PyTorch's "
        "profiler, say), or it predates results kept in traces. The timeline shows it.");
    return;
  }
  const profiling::RunResult& result = *run->trace.run.result;
  if (!result.ok) error_text("The run failed: " + (result.failure.empty() ? "?" : result.failure));
  const bool replicated = result.replicated;
  const auto& reference = result.reference;
  ImGui::Text("%s: %s", run->label.c_str(),
              replicated ? "replicated (every rank holds every weight)"
                         : "sharded (each rank holds a part; gathered for the check)");
  if (reference) {
    const double rel = reference->rel_deviation;
    ImGui::Text(
        "against the single-device reference: ||w - ref|| / ||ref|| = %.3g, max |delta| = %.3g  %s",
        rel, reference->max_abs_deviation, rel <= 1e-5 ? "MATCHES" : "DIFFERS");
  } else {
    ImGui::TextDisabled("no single-device reference was run (run without --no-reference to check)");
  }
  if (!result.sync_groups.empty()) {
    if (replicated) {
      ImGui::Text("ranks against rank 0");
      grid("vs_rank0", result, &profiling::WeightSyncRow::vs_rank0);
    } else {
      ImGui::Text(
          "ranks against rank 0: sharded (each rank gathered the full weights for the check)");
    }
    if (reference) {
      ImGui::Text("each rank's %sweights against the reference", replicated ? "" : "gathered ");
      grid("vs_reference", result, &profiling::WeightSyncRow::vs_reference);
    }
  }

  const LossCurves curves = loss_curves(result);
  ImGui::Text("loss per step: each rank's own micro-batches, and the reference on the whole batch");
  if (!curves.left_out.empty()) {
    std::string ranks;
    for (int r : curves.left_out) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    ImGui::TextDisabled("left out: rank%s %s (pipeline stages before the last compute no loss)",
                        curves.left_out.size() > 1 ? "s" : "", ranks.c_str());
  }
  line_chart("losses", curves.series, ImGui::GetContentRegionAvail().x, 200, "");
}

}  // namespace shardscope::gui
