#include "app/perf/timeline_frames.h"

#include <imgui.h>

namespace shardscope::perf {

TimelineFrames::TimelineFrames(const profiling::Trace& trace, int width, int height)
    : trace_(trace), index_(gui::build_timeline_index(trace)), width_(width), height_(height) {
  ImGuiContext* previous = ImGui::GetCurrentContext();
  ImGuiContext* context = ImGui::CreateContext();
  context_ = context;
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(static_cast<float>(width), static_cast<float>(height));
  io.DeltaTime = 1.0f / 60;
  // As the app's OpenGL 3 backend declares: a draw list may pass 64k vertices.
  io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
  if (previous != nullptr) ImGui::SetCurrentContext(previous);
}

TimelineFrames::~TimelineFrames() {
  ImGui::DestroyContext(static_cast<ImGuiContext*>(context_));
}

void TimelineFrames::draw(double fraction) {
  ImGuiContext* previous = ImGui::GetCurrentContext();
  ImGui::SetCurrentContext(static_cast<ImGuiContext*>(context_));
  const double total_ms = (index_.t_max - index_.t_min) * 1e-6;
  if (fraction >= 1.0) {
    view_.request_range(0, total_ms);
  } else {
    view_.request_range(total_ms * 0.4, total_ms * (0.4 + fraction));
  }
  ImGui::NewFrame();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImVec2(static_cast<float>(width_), static_cast<float>(height_)));
  ImGui::Begin("timeline", nullptr, ImGuiWindowFlags_NoDecoration);
  view_.draw(trace_, index_);
  ImGui::End();
  ImGui::Render();
  vertices_ = ImGui::GetDrawData()->TotalVtxCount;
  ImGui::SetCurrentContext(previous);
}

}  // namespace shardscope::perf
