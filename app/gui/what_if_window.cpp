#include <algorithm>
#include <cstdio>

#include <imgui.h>

#include "app/analysis/node_placement.h"
#include "app/analysis/trace_projection.h"
#include "app/gui/windows.h"
#include "engine/train/config.h"
#include "profiling/metrics/figure_text.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::gui {

namespace {

void project(GuiSession& session, LoadedRun& run) {
  WhatIfState& w = session.what_if;
  w.error.clear();
  w.projected.reset();
  w.figures = nullptr;
  try {
    const auto hw = profiling::load_hardware_profile(w.hardware_names.at(w.hardware));
    const analysis::TraceProjection t = analysis::project_recorded_trace(
        run.trace, hw, w.compute_scale, w.price_fp32 ? "fp32" : "bf16");
    // Ticked, and nothing priced kernel by kernel: say so rather than show a scaled step.
    if (w.price_fp32) analysis::require_priced_precision(t, hw);
    w.figures = {{"hardware", hw.name},
                 {"compute_scale", t.compute_scale},
                 {"scale_source", t.scale_source},
                 {"measured_step_ms", t.measured_summary.step_s * 1e3},
                 {"projected_step_ms", t.projected_summary.step_s * 1e3},
                 {"measured_exposed_ms", t.measured_summary.exposed_s * 1e3},
                 {"projected_exposed_ms", t.projected_summary.exposed_s * 1e3},
                 {"measured_overlap", t.measured_summary.overlap},
                 {"projected_overlap", t.projected_summary.overlap},
                 {"measured_efficiency", t.measured_efficiency},
                 {"projected_efficiency", t.projected_efficiency}};
    if (t.mfu) w.figures["mfu"] = *t.mfu;
    // Every column names its lens: the recording's wall clock beside device time on the target.
    w.figures["measured_lens"] = "measured wall clock";
    // And, between them, the same run in device time where it was recorded (the timeline's lens):
    // wall clock to device time is one change, this machine to the target another, and a
    // student comparing the outer columns alone would credit the hardware with both.
    if (const ShownRun here = session.shown(run); here.device_time && here.trace != nullptr) {
      const analysis::StepSummary s = analysis::summarise(*here.trace);
      w.figures["here_lens"] = here.title;
      w.figures["here_step_ms"] = s.step_s * 1e3;
      w.figures["here_exposed_ms"] = s.exposed_s * 1e3;
      w.figures["here_overlap"] = s.overlap;
      w.figures["here_efficiency"] = analysis::scaling_efficiency(s, here.trace->ranks.size());
    }
    w.figures["projected_lens"] = "device time on " + hw.name + ": " + t.device_model;
    if (!t.compute_model.empty()) {
      w.figures["compute_model"] = t.compute_model;
      // The configuration projection slows a GPU's compute and its collectives where they run
      // together; a replay keeps each at its own pace. Said, where the GPU measured the slowdown.
      if (const auto c = hw.gpu.contention(); c.measured) {
        char text[320];
        std::snprintf(text, sizeof text,
                      "Not modelled in a replay: compute and collectives slowing each other where "
                      "they overlap on one GPU (%s measured its GEMMs at %.2f of their pace beside "
                      "a collective), so overlapped communication hides here for free.",
                      hw.name.c_str(), c.compute_rate);
        w.figures["not_modelled"] = text;
      }
      if (t.launch_bound) {
        w.figures["launch_bound"] =
            "On " + hw.name +
            ", this run's GPU would wait on its host: each micro-batch launches more kernels "
            "than the GPU takes time to run, so the step is bound by launches, not by its "
            "matrix products or its communication.";
      }
    } else if (t.compute_scale != 1) {
      w.figures["not_modelled"] =
          "Not modelled: what a GPU pays per kernel (launch and host dispatch) and how its "
          "efficiency depends on a matrix's shape. Compute is the recorded "
          "time x one scale, the ratio of matmul rates, so a small model, which a GPU runs "
          "bound by launches, projects far too fast and all communication.";
    }
    const analysis::NodePlacement placement =
        analysis::node_placement(static_cast<int>(run.trace.ranks.size()), hw);
    w.figures["nodes"] = placement.nodes;
    w.figures["inter_node_link_used"] = placement.inter_link_used;
    w.figures["placement"] = placement.note;
    w.projected = make_loaded_run(t.projected, "projected onto " + hw.name);
    w.projected->label = run.label + ", projected onto " + hw.name;
    w.timeline.reset();
  } catch (const ConfigError& e) {
    // The tab's own words, not the config key: "fp32 kernels: 8xA100 has no measured ...".
    const std::string message = std::string(e.what()).substr(e.field().size() + 2);
    w.error = e.field() == "strategy_options.precision" ? "fp32 kernels: " + message : message;
  } catch (const std::exception& e) {
    w.error = e.what();
  }
}

}  // namespace

void draw_what_if_window(GuiSession& session) {
  WhatIfState& w = session.what_if;
  how_to_read(
      "What the measured run would do on real GPUs: each rank's recorded chain (compute, "
      "collectives, waits) is re-scheduled onto its own device of the chosen hardware, compute "
      "scaled by the device's speed, each collective priced by NCCL's ring/tree cost model. "
      "The projected timeline below has the same rows as the measured one.");
  LoadedRun* run = run_or_hint(session);
  if (run == nullptr) return;
  ImGui::SetNextItemWidth(200);
  if (!hardware_combo("hardware", &w.hardware_names, &w.hardware)) {
    ImGui::TextWrapped("No hardware profiles found in %s.",
                       profiling::hardware_profile_directory().c_str());
    return;
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  ImGui::InputFloat("compute scale (0: calibrated)", &w.compute_scale, 0, 0, "%.4g");
  // What `project --compute-scale` takes: 0 (calibrated) or 1e-6 to 1e6; a typed -1 or 1e30
  // becomes the nearest of those, NaN the calibrated default.
  if (!(w.compute_scale >= 0)) w.compute_scale = 0;
  if (w.compute_scale > 0) w.compute_scale = std::clamp(w.compute_scale, 1e-6f, 1e6f);
  ImGui::SameLine();
  // A given scale replaces the kernel-by-kernel pricing, and with it any precision.
  ImGui::BeginDisabled(w.compute_scale > 0);
  ImGui::Checkbox("fp32 kernels", &w.price_fp32);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip(
        "Price the run's kernels in fp32 at the GPU's measured fp32 rates; "
        "unticked, in bf16 mixed precision, as GPUs train.");
  ImGui::SameLine();
  if (ImGui::Button("Project") || w.project_requested) {
    w.project_requested = false;
    project(session, *run);
  }
  if (!w.error.empty()) {
    error_text(w.error);
  }
  if (!w.figures.is_object()) return;
  const auto& f = w.figures;
  if (f.contains("compute_model")) {
    ImGui::TextWrapped("%s", f["compute_model"].get<std::string>().c_str());
    if (f.contains("launch_bound"))
      ImGui::TextWrapped("%s", f["launch_bound"].get<std::string>().c_str());
  } else {
    ImGui::Text("compute scale %.4g (%s)", f["compute_scale"].get<double>(),
                f["scale_source"].get<std::string>().c_str());
  }
  ImGui::TextWrapped("%s", f["placement"].get<std::string>().c_str());
  if (f.contains("not_modelled")) error_text(f["not_modelled"].get<std::string>());
  const bool here = f.contains("here_lens");
  if (here) ImGui::TextWrapped("device time here: %s", f["here_lens"].get<std::string>().c_str());
  if (ImGui::BeginTable("figures", here ? 4 : 3,
                        ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupColumn("");
    ImGui::TableSetupColumn(f["measured_lens"].get<std::string>().c_str());
    if (here) ImGui::TableSetupColumn("device time here");
    ImGui::TableSetupColumn(("projected: " + f["projected_lens"].get<std::string>()).c_str());
    ImGui::TableHeadersRow();
    // One row: the figure `key` in each column (measured_, here_, projected_), `scale` times.
    auto line = [&](const char* what, const std::string& key, double scale, const char* format) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(what);
      for (const char* column : {"measured_", "here_", "projected_"}) {
        if (!f.contains(column + key)) continue;
        char text[48];
        std::snprintf(text, sizeof(text), format, scale * f[column + key].get<double>());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(text);
      }
    };
    line("step time (slowest rank)", "step_ms", 1, "%.3f ms");
    line("exposed communication", "exposed_ms", 1, "%.3f ms");
    line("overlap", "overlap", 100, "%.0f %%");
    line("scaling efficiency", "efficiency", 100, "%.0f %%");
    ImGui::EndTable();
  }
  if (f.contains("mfu"))
    ImGui::Text("MFU on %s: %s", f["hardware"].get<std::string>().c_str(),
                profiling::format_percent(f["mfu"].get<double>()).c_str());
  if (w.projected) {
    ImGui::Separator();
    ImGui::Text("projected timeline: %s", w.projected->label.c_str());
    w.timeline.draw(w.projected->trace, w.projected->index);
  }
}

}  // namespace shardscope::gui
