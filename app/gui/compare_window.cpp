#include <algorithm>
#include <fstream>
#include <sstream>

#include <imgui.h>

#include "app/gui/windows.h"

namespace shardscope::gui {

namespace {

// Sort keys: numbers by value (by the column's header), text by text.
bool numeric(const std::string& header, const analysis::ComparisonRow& r, double* value) {
  if (header == "world")
    *value = r.world;
  else if (header == "peak MB/rank")
    *value = double(r.peak_max);
  else if (header == "spread MB")
    *value = double(r.peak_max - r.peak_min);
  else if (header == "final loss")
    *value = r.final_loss;
  else if (header == "step ms")
    *value = r.step_s;
  else if (header == "wire MB/rank/step")
    *value = double(r.wire_bytes_per_step);
  else if (header == "overlap worst rank / median")
    *value = r.overlap_worst;
  else if (header == "exposed ms")
    *value = r.exposed_ms;
  else
    return false;
  return true;
}

}  // namespace

void draw_compare_window(GuiSession& session) {
  how_to_read(
      "Every run loaded or finished in this session, in the columns of `shardscope bench`, with a "
      "column for each setting that differs among them (preset, overlap, schedule, bucket, "
      "precision, lens). Peak is what one rank held at once; 'vs torch_ddp' compares it with "
      "PyTorch's DDP run of the same model and global batch, and says why when there is none. "
      "Click a header to sort; export the table as CSV or Markdown.");
  // Finished runs only: a running one has no result yet. `run_of` maps rows back to runs.
  std::vector<analysis::ComparisonRow> rows;
  std::vector<int> run_of;
  for (size_t i = 0; i < session.runs.size(); ++i) {
    if (session.runs[i]->live) continue;
    // Through the session's lens: device time by default, as the timeline shows it.
    rows.push_back(*session.shown(*session.runs[i]).row);
    run_of.push_back(static_cast<int>(i));
  }
  if (!run_of.empty()) {
    // The lens every row is timed through (step ms, overlap, exposed ms). Its title counts the
    // first run's ranks ("device time: 4 ranks on ..."), which rows of other worlds do not share.
    const ShownRun view = session.shown(*session.runs[run_of.front()]);
    const bool one_world = std::all_of(
        rows.begin(), rows.end(), [&](const auto& r) { return r.world == rows.front().world; });
    std::string lens = view.title;
    const std::string counted = std::to_string(rows.front().world) + " ranks on ";
    if (const size_t at = lens.find(counted); !one_world && at != std::string::npos)
      lens.replace(at, counted.size(), "each run's ranks on ");
    ImGui::TextDisabled("times: %s", lens.c_str());
  }
  const auto shown = analysis::distinguishing_columns(rows);
  const auto headers = analysis::comparison_headers(shown);
  static std::vector<int> order;
  order.resize(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_Sortable | ImGuiTableFlags_SizingFixedFit |
                                ImGuiTableFlags_ScrollX;
  if (ImGui::BeginTable("compare", static_cast<int>(headers.size()), flags,
                        ImVec2(0, std::min(400.0f, 60.0f + 22.0f * rows.size())))) {
    for (const auto& h : headers) ImGui::TableSetupColumn(h.c_str());
    ImGui::TableHeadersRow();
    if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsCount > 0) {
      const int column = specs->Specs[0].ColumnIndex;
      const bool ascending = specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
      const std::string& header = headers[column];
      auto less = [&](int a, int b) {
        double x = 0, y = 0;
        if (numeric(header, rows[a], &x) && numeric(header, rows[b], &y)) return x < y;
        return analysis::comparison_cells(rows[a], rows, shown)[column] <
               analysis::comparison_cells(rows[b], rows, shown)[column];
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return ascending ? less(a, b) : less(b, a); });
    }
    for (int i : order) {
      const auto cells = analysis::comparison_cells(rows[i], rows, shown);
      ImGui::TableNextRow();
      for (size_t c = 0; c < cells.size(); ++c) {
        ImGui::TableNextColumn();
        if (c == 0) {
          if (ImGui::Selectable(cells[c].c_str(), session.current == run_of[i],
                                ImGuiSelectableFlags_SpanAllColumns)) {
            session.select_run(run_of[i]);
          }
        } else {
          ImGui::TextUnformatted(cells[c].c_str());
        }
      }
    }
    ImGui::EndTable();
  }
  char path[512];
  std::snprintf(path, sizeof(path), "%s", session.export_path.c_str());
  ImGui::SetNextItemWidth(320);
  if (ImGui::InputText("##export", path, sizeof(path))) session.export_path = path;
  for (const char* format : {"csv", "markdown"}) {
    ImGui::SameLine();
    const std::string label = std::string("Export ") + format;
    if (ImGui::Button(label.c_str())) {
      std::ofstream out(session.export_path);
      analysis::print_comparison(rows, format, out);
      session.message =
          out ? "wrote " + session.export_path : "cannot write " + session.export_path;
    }
  }
  ImGui::SameLine();
  if (ImGui::Button("Copy markdown")) {
    std::ostringstream out;
    analysis::print_comparison(rows, "markdown", out);
    ImGui::SetClipboardText(out.str().c_str());
  }
}

}  // namespace shardscope::gui
