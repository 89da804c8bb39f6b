#include <algorithm>
#include <cstdio>

#include <imgui.h>

#include "app/gui/gui_style.h"
#include "app/gui/line_chart.h"
#include "app/gui/memory_breakdown.h"
#include "app/gui/windows.h"
#include "engine/state/recorded_config.h"
#include "engine/train/config.h"
#include "engine/train/config_bounds.h"
#include "profiling/projection/memory_projection.h"
#include "strategies/common/memory_formula.h"

namespace shardscope::gui {

using profiling::MemoryKind;

namespace {

constexpr MemoryKind kStacked[] = {MemoryKind::kParameters,     MemoryKind::kGradients,
                                   MemoryKind::kOptimizerState, MemoryKind::kActivations,
                                   MemoryKind::kCommBuffers,    MemoryKind::kTemporaries};

// The formula's bytes for one rank as the run recorded them (`formula_bytes`: the strategy's
// own layout, the rank's pipeline stage and tensor shard), or false for traces without it.
bool recorded_formula(const profiling::RecordedRank& rank, int64_t (&bytes)[6]) {
  if (!rank.formula_bytes) return false;
  int64_t sum = 0;
  for (int k = 0; k < 6; ++k) {
    bytes[k] = (*rank.formula_bytes)[static_cast<int>(kStacked[k])];
    sum += bytes[k];
  }
  return sum > 0;
}

// For traces written before runs recorded their formula: the busiest GPU's bytes for the
// run's configuration (laid out by the strategies' own rule, memory_formula.h), or nothing when
// the trace does not say what ran.
bool predicted(const profiling::RunRecord& run, profiling::MemoryProjection* out) {
  std::optional<Config> config = recorded_config(run);
  if (!config) return false;
  try {
    finalize(*config);
    *out = profiling::project_memory(model_shape(config->model), memory_layout(*config));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

struct Bar {
  std::string label;
  int64_t bytes[6] = {};
  bool prediction = false;
  // The exact peak the rank's allocator hook saw. Samples are taken when the total moves by
  // 1 MiB (or 1/32 of the peak), so a short spike can fall between them: the tick shows it.
  int64_t exact_peak = 0;
};

void draw_bars(const char* id, const std::vector<Bar>& bars, float height, float bar_w = 46) {
  double most = 1;
  for (const auto& b : bars) {
    double sum = 0;
    for (int64_t v : b.bytes) sum += double(v);
    most = std::max(most, std::max(sum, double(b.exact_peak)));
  }
  const float gap = 22;
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float width = std::max(200.0f, bars.size() * (bar_w + gap) + 80);
  ImGui::PushID(id);
  ImGui::Dummy(ImVec2(width, height));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float base = p.y + height - 34;
  const float scale = (height - 60) / static_cast<float>(most);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f MB", most / 1e6);
  dl->AddText(ImVec2(p.x, p.y + 4), 0xFFB0B0B0, buf);
  for (size_t i = 0; i < bars.size(); ++i) {
    const float x = p.x + 70 + i * (bar_w + gap);
    float y = base;
    double sum = 0;
    for (int k = 0; k < 6; ++k) {
      const float h = static_cast<float>(bars[i].bytes[k]) * scale;
      const ImU32 colour = memory_kind_colour(kStacked[k]);
      if (bars[i].prediction) {
        dl->AddRect(ImVec2(x, y - h), ImVec2(x + bar_w, y), colour, 0, 0, 2.0f);
      } else {
        dl->AddRectFilled(ImVec2(x, y - h), ImVec2(x + bar_w, y), colour);
      }
      y -= h;
      sum += bars[i].bytes[k];
    }
    float label_y = y;
    if (bars[i].exact_peak > 0) {
      const float peak_y = base - static_cast<float>(bars[i].exact_peak) * scale;
      dl->AddLine(ImVec2(x - 4, peak_y), ImVec2(x + bar_w + 4, peak_y), 0xFFFFFFFF, 2.0f);
      label_y = std::min(label_y, peak_y);
      sum = double(bars[i].exact_peak);
    }
    std::snprintf(buf, sizeof(buf), "%.2f", sum / 1e6);
    dl->AddText(ImVec2(x + 2, label_y - ImGui::GetFontSize() - 2), 0xFFE0E0E0, buf);
    dl->AddText(ImVec2(x, base + 4), 0xFFD0D0D0, bars[i].label.c_str());
    if (ImGui::IsMouseHoveringRect(ImVec2(x, p.y), ImVec2(x + bar_w, base))) {
      ImGui::BeginTooltip();
      // The formula's bar is named "formula" already: "formula (formula)" said it twice.
      ImGui::Text("%s%s", bars[i].label.c_str(),
                  bars[i].prediction ? ": the formula's prediction" : " (measured at peak)");
      for (int k = 0; k < 6; ++k) {
        ImGui::Text("%-21s %8.3f MB", memory_kind_label(kStacked[k]), bars[i].bytes[k] / 1e6);
      }
      if (bars[i].exact_peak > 0)
        ImGui::Text("%-16s %8.3f MB", "exact peak", bars[i].exact_peak / 1e6);
      ImGui::EndTooltip();
    }
  }
  ImGui::PopID();
}

void legend() {
  for (MemoryKind k : kStacked) {
    ImGui::ColorButton(memory_kind_label(k), ImGui::ColorConvertU32ToFloat4(memory_kind_colour(k)),
                       ImGuiColorEditFlags_NoTooltip, ImVec2(10, 10));
    ImGui::SameLine(0, 3);
    ImGui::TextUnformatted(memory_kind_label(k));
    ImGui::SameLine();
  }
  ImGui::TextDisabled("| outlined: the formula's prediction; white tick: the exact peak");
}

std::vector<Bar> measured_bars(const LoadedRun& run, bool with_prediction) {
  std::vector<Bar> bars;
  profiling::MemoryProjection p;
  const bool have_prediction = with_prediction && predicted(run.trace.run, &p);
  static const std::vector<profiling::RecordedRank> kNone;
  const auto& ranks = run.trace.run.result ? run.trace.run.result->ranks : kNone;
  for (size_t r = 0; r < run.trace.ranks.size(); ++r) {
    const auto& rank = run.trace.ranks[r];
    const MemoryBreakdown& peak = run.memory_peaks[r];
    Bar b;
    b.label = "rank " + std::to_string(rank.rank);
    if (r < ranks.size()) b.exact_peak = ranks[r].peak_allocated_bytes;
    for (int k = 0; k < 6; ++k) b.bytes[k] = peak.of(kStacked[k]);
    bars.push_back(b);
    Bar f;
    f.label = "formula";
    f.prediction = true;
    if (with_prediction && r < ranks.size() && recorded_formula(ranks[r], f.bytes)) {
      bars.push_back(f);
    } else if (have_prediction) {
      f.bytes[0] = static_cast<int64_t>(p.parameters);
      f.bytes[1] = static_cast<int64_t>(p.gradients);
      f.bytes[2] = static_cast<int64_t>(p.optimizer_state);
      f.bytes[3] = static_cast<int64_t>(p.activations);
      bars.push_back(f);
    }
  }
  return bars;
}

// One rank's categories over time (each a line), the rank chosen with a slider: what a
// pipeline stage or a ZeRO rank holds, phase by phase.
void category_lines(const LoadedRun& run) {
  static int chosen = 0;
  const int ranks = static_cast<int>(run.trace.ranks.size());
  if (ranks == 0) return;
  chosen = std::clamp(chosen, 0, ranks - 1);
  if (ranks > 1) {
    ImGui::SetNextItemWidth(160);
    ImGui::SliderInt("##memory_categories", &chosen, 0, ranks - 1);
    ImGui::SameLine();
  }
  ImGui::Text("rank %d by category over time (ms of the measured wall clock)",
              run.trace.ranks[chosen].rank);
  std::vector<ChartSeries> series;
  for (MemoryKind k : kStacked) {
    ChartSeries s;
    s.label = memory_kind_label(k);
    s.colour = memory_kind_colour(k);
    s.held = true;
    for (const auto& c : run.trace.ranks[chosen].counters) {
      if (c.kind != k) continue;
      s.x.push_back(static_cast<float>((c.t_ns - run.index.t_min) * 1e-6));
      s.y.push_back(static_cast<float>(c.bytes / 1e6));
    }
    if (!s.x.empty()) series.push_back(std::move(s));
  }
  if (series.empty()) {
    ImGui::TextDisabled("(this trace recorded no categories over time)");
    return;
  }
  line_chart("memory_categories", series, ImGui::GetContentRegionAvail().x, 150, "MB", "ms");
}

// The rank holding the most in each loaded run, side by side: the ZeRO paper's order of the
// strategies at a glance. Drawn right under this run's peaks, where a 900-pixel-high window still
// shows it (below the charts it once fell off the bottom).
void draw_side_by_side(const GuiSession& session) {
  ImGui::Text("strategies side by side: the rank holding the most, per run");
  std::vector<Bar> bars;
  for (const auto& other : session.runs) {
    Bar best;
    int64_t most = -1;
    for (const MemoryBreakdown& peak : other->memory_peaks) {
      if (peak.total() > most) {
        most = peak.total();
        for (int k = 0; k < 6; ++k) best.bytes[k] = peak.of(kStacked[k]);
      }
    }
    best.label = other->row.strategy;
    best.exact_peak = other->row.peak_max;
    bars.push_back(best);
  }
  draw_bars("side_by_side", bars, 240, 110);
}

}  // namespace

void draw_memory_window(GuiSession& session) {
  LoadedRun* run = run_or_hint(session);
  if (run == nullptr) return;
  how_to_read(
      "Each rank's own memory (never the shared device's total) at the moment it held the most, "
      "stacked by what each block is, as the allocator saw it: parameters, gradients, optimizer "
      "state, activations (saved in forward for backward), communication buffers and "
      "temporaries (scratch). None is a remainder. The outlined bar beside it is the formula "
      "for the same rank: ZeRO paper for the state, our GPT's saved tensors for activations "
      "(per pipeline stage). DDP keeps 16 bytes per parameter on every rank (fp32 Adam); ZeRO-1 "
      "divides the purple optimizer state by N, ZeRO-2 the green gradients too, FSDP the blue "
      "parameters as well.");
  // A trace with no memory samples (a projection, or a run recorded without them) has nothing
  // to stack: bars of 0.00 MB would claim the ranks held nothing.
  const bool sampled =
      std::any_of(run->trace.ranks.begin(), run->trace.ranks.end(),
                  [](const profiling::RankTrace& r) { return !r.counters.empty(); });
  if (!sampled) {
    ImGui::Text("%s", run->label.c_str());
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled(
        "%s",
        run->trace.run.projected
            ? "This trace is a projection: nothing ran, so no memory was sampled. The memory "
              "each GPU would hold, by category, is in `shardscope project`'s output and, for a "
              "configuration, on the Launch tab's projection."
            : "This trace holds no memory samples (recorded with --no-tracing, or by a tool that "
              "records none), so there is nothing to draw here.");
    ImGui::PopTextWrapPos();
    return;
  }
  legend();
  ImGui::Text("%s: per rank at its peak", run->label.c_str());
  if (!run->memory_peaks.empty() && !run->trace.ranks.empty()) {
    ImGui::SameLine();
    ImGui::TextDisabled(
        "(rank %d's peak: %s)", run->trace.ranks[0].rank,
        peak_moment(run->trace, run->trace.ranks[0], run->memory_peaks[0].t_ns).c_str());
  }
  draw_bars("peak", measured_bars(*run, true), 260);
  if (session.runs.size() > 1) draw_side_by_side(session);

  std::vector<ChartSeries> series;
  for (size_t r = 0; r < run->index.memory.size(); ++r) {
    ChartSeries s;
    s.label = "rank " + std::to_string(run->trace.ranks[r].rank);
    s.colour = rank_colour(static_cast<int>(r));
    s.held = true;
    const auto& samples = run->index.memory[r];
    // At most ~600 points per rank: the most held within each slice of time.
    const size_t stride = std::max<size_t>(1, samples.size() / 600);
    for (size_t i = 0; i < samples.size(); i += stride) {
      int64_t most = 0;
      for (size_t j = i; j < std::min(samples.size(), i + stride); ++j)
        most = std::max(most, samples[j].second);
      s.x.push_back(static_cast<float>((samples[i].first - run->index.t_min) * 1e-6));
      s.y.push_back(static_cast<float>(most / 1e6));
    }
    series.push_back(std::move(s));
  }
  std::vector<ChartMark> steps;  // where each step began, as on the timeline
  for (const auto& s : run->index.steps)
    steps.push_back({static_cast<float>((s.t0_ns - run->index.t_min) * 1e-6),
                     "step " + std::to_string(s.step)});
  // Allocations are sampled on the measured clock; device time moves work, not samples.
  ImGui::Text(
      "memory over time (ms of the measured wall clock, not the timeline's device time), each "
      "step marked where it began");
  line_chart("memory_over_time", series, ImGui::GetContentRegionAvail().x, 170, "MB", "ms", steps);
  category_lines(*run);
}

}  // namespace shardscope::gui
