#pragma once

#include "app/gui/gui_session.h"

namespace shardscope::gui {

// One function per window (tab); each starts with a short "how to read this".
void draw_launch_window(GuiSession& session);
void draw_timeline_window(GuiSession& session);
void draw_memory_window(GuiSession& session);
void draw_sync_window(GuiSession& session);
void draw_experts_window(GuiSession& session);
void draw_compare_window(GuiSession& session);
void draw_what_if_window(GuiSession& session);

// The collapsed "How to read this" that opens every window.
void how_to_read(const char* text);
// A problem, wrapped, in red.
void error_text(const std::string& text);
// The run a window shows, or null after saying how to get one.
LoadedRun* run_or_hint(GuiSession& session);

}  // namespace shardscope::gui

namespace shardscope::gui {
// The Launch form's actions, also driven by scripts.
void set_launch_field(GuiSession& session, const std::string& key, const std::string& text);
bool start_launch(GuiSession& session);
}  // namespace shardscope::gui
