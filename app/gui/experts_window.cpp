#include <algorithm>
#include <cstdio>
#include <string>

#include <imgui.h>

#include "app/analysis/expert_load.h"
#include "app/gui/gui_style.h"
#include "app/gui/windows.h"

namespace shardscope::gui {
namespace {

// More experts than this are drawn as bars only: a table that wide could not be read.
constexpr int kMaxTableExperts = 32;

std::string megabytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MB", bytes / 1e6);
  return buf;
}

// One bar per expert, its height the tokens routed to it, a line at the mean.
void expert_bars(const analysis::ExpertLoad& load) {
  const float width = ImGui::GetContentRegionAvail().x, height = 140;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const int64_t busiest = *std::max_element(load.per_expert.begin(), load.per_expert.end());
  double total = 0;
  for (int64_t n : load.per_expert) total += double(n);
  const double mean = total / load.experts;
  const float slot = width / load.experts;
  const double scale = busiest > 0 ? (height - 16) / double(busiest) : 0;
  for (int e = 0; e < load.experts; ++e) {
    const float x0 = origin.x + e * slot + slot * 0.1f,
                x1 = origin.x + (e + 1) * slot - slot * 0.1f;
    const float y1 = origin.y + height - 14;
    const float y0 = y1 - static_cast<float>(load.per_expert[e] * scale);
    draw->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), load_colour(load.per_expert[e], mean));
    if (slot >= 18) {
      char label[16];
      std::snprintf(label, sizeof(label), "%d", e);
      draw->AddText(ImVec2(x0, y1 + 1), IM_COL32(200, 200, 200, 255), label);
    }
  }
  const float mean_y = origin.y + height - 14 - static_cast<float>(mean * scale);
  draw->AddLine(ImVec2(origin.x, mean_y), ImVec2(origin.x + width, mean_y),
                IM_COL32(255, 255, 255, 200), 1.5f);
  draw->AddText(ImVec2(origin.x + 4, mean_y - 15), IM_COL32(255, 255, 255, 220), "mean");
  ImGui::Dummy(ImVec2(width, height));
}

void sender_table(const analysis::ExpertLoad& load) {
  if (!ImGui::BeginTable("routed", load.experts + 1,
                         ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
    return;
  }
  const int per_rank = load.expert_parallel > 0 ? load.experts / load.expert_parallel : 0;
  ImGui::TableSetupColumn("sent by");
  char buf[48];
  for (int e = 0; e < load.experts; ++e) {
    if (per_rank > 0) {
      // Its holder's place in each expert-parallel group (the world rank when ep is the world).
      std::snprintf(buf, sizeof(buf), load.expert_parallel < load.ranks ? "e%d @g%d" : "e%d @r%d",
                    e, e / per_rank);
    } else {
      std::snprintf(buf, sizeof(buf), "e%d", e);
    }
    ImGui::TableSetupColumn(buf);
  }
  ImGui::TableHeadersRow();
  auto row = [&](const char* name, const std::vector<int64_t>& counts) {
    double mean = 0;
    for (int64_t n : counts) mean += double(n);
    mean /= load.experts;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(name);
    for (int e = 0; e < load.experts; ++e) {
      ImGui::TableNextColumn();
      ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, load_colour(counts[e], mean));
      ImGui::Text("%lld", static_cast<long long>(counts[e]));
    }
  };
  for (int r = 0; r < load.ranks; ++r) {
    std::snprintf(buf, sizeof(buf), "rank %d", r);
    row(buf, load.sent[r]);
  }
  row("all ranks", load.per_expert);
  ImGui::EndTable();
}

void rank_table(const analysis::ExpertLoad& load) {
  if (!ImGui::BeginTable("ranks", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit))
    return;
  ImGui::TableSetupColumn("rank");
  ImGui::TableSetupColumn("tokens its experts computed");
  ImGui::TableSetupColumn("tokens it sent to other ranks");
  ImGui::TableSetupColumn("uniform routing: N k (ep-1)/ep");
  ImGui::TableSetupColumn("all_to_all bytes it sent (fwd + bwd)");
  ImGui::TableHeadersRow();
  double mean = 0;
  for (int64_t n : load.computed_by_rank) mean += double(n);
  mean /= std::max(1, load.ranks);
  for (int r = 0; r < load.ranks; ++r) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("rank %d", r);
    ImGui::TableNextColumn();
    ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, load_colour(load.computed_by_rank[r], mean));
    ImGui::Text("%lld", static_cast<long long>(load.computed_by_rank[r]));
    ImGui::TableNextColumn();
    ImGui::Text("%lld", static_cast<long long>(load.sent_off_rank[r]));
    ImGui::TableNextColumn();
    ImGui::Text("%.0f", load.uniform_off_rank[r]);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(megabytes(load.all_to_all_bytes[r]).c_str());
  }
  ImGui::EndTable();
}

}  // namespace

void draw_experts_window(GuiSession& session) {
  LoadedRun* run = run_or_hint(session);
  if (run == nullptr) return;
  how_to_read(
      "A mixture of experts sends each token to the k experts its router scores highest. The "
      "bars are the tokens each expert got (the white line is the mean): routing is learned, "
      "so some experts get more, and a dropless layer waits for its busiest one. Under expert "
      "parallelism (ep) each rank holds E/ep experts: tokens travel to their experts' ranks and "
      "back by all_to_all, and a rank whose experts got more computes longer while the others "
      "wait in the combine (pink on the timeline). The table below says how many tokens each "
      "rank sent off-rank against uniform routing, and the all_to_all bytes it sent.");
  auto& view = session.experts;
  const analysis::ExpertLoad whole = analysis::expert_load(run->trace, -1, -1);
  if (!whole.problem.empty()) {
    view.figures = {{"problem", whole.problem}};
    ImGui::TextWrapped("%s", whole.problem.c_str());
    return;
  }
  view.step = std::clamp(view.step, -1, whole.steps - 1);
  view.layer = std::clamp(view.layer, -1, whole.layers - 1);
  ImGui::SetNextItemWidth(240);
  ImGui::SliderInt("step (-1: all)", &view.step, -1, whole.steps - 1);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(240);
  ImGui::SliderInt("layer (-1: all)", &view.layer, -1, whole.layers - 1);
  const analysis::ExpertLoad load = analysis::expert_load(run->trace, view.step, view.layer);
  view.figures = {{"step", view.step},
                  {"layer", view.layer},
                  {"per_expert", load.per_expert},
                  {"expert_imbalance", load.expert_imbalance},
                  {"computed_by_rank", load.computed_by_rank},
                  {"rank_imbalance", load.rank_imbalance}};
  ImGui::Text("%d experts, top-%d, %d ranks%s", load.experts, load.top_k, load.ranks,
              load.expert_parallel > 0
                  ? (", ep " + std::to_string(load.expert_parallel) + ": " +
                     std::to_string(load.experts / load.expert_parallel) + " experts a rank")
                        .c_str()
                  : " (every rank holds every expert)");
  ImGui::Text("busiest expert / mean: %.2f", load.expert_imbalance);
  if (load.expert_parallel > 0) {
    ImGui::SameLine();
    ImGui::Text("   busiest rank's experts / mean: %.2f", load.rank_imbalance);
  }
  expert_bars(load);
  if (load.experts <= kMaxTableExperts) {
    ImGui::Text("tokens each rank's router sent each expert");
    sender_table(load);
  }
  if (load.expert_parallel > 0 && load.computed_by_rank.size() == size_t(load.ranks)) {
    ImGui::Spacing();
    ImGui::Text("per rank: the load its experts carry and what it sent");
    rank_table(load);
  }
}

}  // namespace shardscope::gui
