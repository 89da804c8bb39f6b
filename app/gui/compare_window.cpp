#include <algorithm>
#include <fstream>
#include <sstream>

#include <imgui.h>

#include "app/gui/windows.h"

namespace shardscope::gui {

namespace {

// Sort keys: numbers by value, text by text.
double numeric(const cli::ComparisonRow& r, int column) {
  switch (column) {
    case 1:
      return r.world;
    case 4:
      return double(r.peak_max);
    case 5:
      return double(r.peak_max - r.peak_min);
    case 8:
      return r.final_loss;
    case 9:
      return r.step_s;
    case 10:
      return double(r.bytes_per_step);
    case 11:
      return r.overlap;
    case 12:
      return r.exposed_ms;
    default:
      return 0;
  }
}

}  // namespace

void draw_compare_window(GuiSession& session) {
  how_to_read(
      "Every run loaded or finished in this session, in the columns of `shardscope bench`. Peak "
      "is what one rank held at once; 'vs torch_ddp' compares it with PyTorch's DDP run when "
      "there is one. Click a header to sort; export the table as CSV or Markdown.");
  // Finished runs only: a running one has no result yet. `run_of` maps rows back to runs.
  std::vector<cli::ComparisonRow> rows;
  std::vector<int> run_of;
  for (size_t i = 0; i < session.runs.size(); ++i) {
    if (session.runs[i]->live) continue;
    rows.push_back(session.runs[i]->row);
    run_of.push_back(static_cast<int>(i));
  }
  const auto headers = cli::comparison_headers();
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
      const auto* baseline = cli::torch_ddp_row(rows);
      const bool text = column == 0 || column == 2 || column == 3 || column == 6 || column == 7;
      auto less = [&](int a, int b) {
        if (text) {
          return cli::comparison_cells(rows[a], baseline)[column] <
                 cli::comparison_cells(rows[b], baseline)[column];
        }
        return numeric(rows[a], column) < numeric(rows[b], column);
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return ascending ? less(a, b) : less(b, a); });
    }
    const auto* baseline = cli::torch_ddp_row(rows);
    for (int i : order) {
      const auto cells = cli::comparison_cells(rows[i], baseline);
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
      cli::print_comparison(rows, format, out);
      session.message =
          out ? "wrote " + session.export_path : "cannot write " + session.export_path;
    }
  }
  ImGui::SameLine();
  if (ImGui::Button("Copy markdown")) {
    std::ostringstream out;
    cli::print_comparison(rows, "markdown", out);
    ImGui::SetClipboardText(out.str().c_str());
  }
}

}  // namespace shardscope::gui
