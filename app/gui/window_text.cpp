// Text every window shares: how to read it, what to do without a run, problems, and what each
// strategy teaches.
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

const char* strategy_teaching_note(const std::string& s) {
  if (s == "single")
    return "One device trains on the whole batch: the reference every strategy must match.";
  if (s == "ddp_flat")
    return "One all_reduce per parameter, launched as soon as its gradient is ready: many small "
           "collectives overlap backward but each pays the latency.";
  if (s == "ddp_bucketed")
    return "Gradients are grouped into buckets, each all_reduced while backward goes on. With "
           "overlap on, the orange collectives sit under the blue backward spans and the red "
           "exposed-communication line shrinks; turn overlap off to see it grow.";
  if (s == "torch_ddp")
    return "PyTorch's own DDP engine (c10d::Reducer): buckets in reverse order, reduced during "
           "backward. The baseline the others are compared with.";
  if (s == "zero1" || s.find("+zero1") != std::string::npos)
    return "ZeRO-1: optimizer state is split across ranks (purple bar shrinks by N); gradients are "
           "reduce-scattered and updated shards all_gathered.";
  if (s == "zero2")
    return "ZeRO-2: gradients are sharded too; each rank keeps only its shard's gradients.";
  if (s == "fsdp")
    return "FSDP (ZeRO-3): parameters are sharded as well and all_gathered unit by unit before "
           "forward and backward; memory bars shrink by about N, communication grows by half.";
  if (s == "tp")
    return "Tensor parallelism (Megatron): each block's matrices are split across ranks; two "
           "all_reduces per block in forward and two in backward sit on the critical path.";
  if (s == "pp")
    return "Pipeline parallelism: stages of blocks pass activations with send/recv; the gaps "
           "before "
           "the first and after the last micro-batch are the bubble, (p-1)/(m+p-1) of the step.";
  if (s == "hybrid")
    return "Data x tensor x pipeline parallel: tensor groups innermost, pipeline outermost; each "
           "dimension talks over its own sub-group (tp{..}, dp{..}, pp{..}).";
  return "";
}

}  // namespace shardscope::gui
