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
// A hardware profile picker (labelled `label`; "##..." for none): the profiles found, loaded on
// first use, with 8xH100 chosen at first. False when there is none to pick.
bool hardware_combo(const char* label, std::vector<std::string>* names, int* chosen);
// The run a window shows, or null after saying how to get one.
LoadedRun* run_or_hint(GuiSession& session);

}  // namespace shardscope::gui

namespace shardscope::gui {
// The Launch form's actions, also driven by scripts.
void set_launch_field(GuiSession& session, const std::string& key, const std::string& text);
bool start_launch(GuiSession& session);
// The Launch tab's "project onto GPUs" panel (launch_projection.cpp): the form's configuration
// priced kernel by kernel on a hardware profile; the step opens as a run.
void draw_launch_projection(GuiSession& session);
// Projects the form now onto the panel's chosen profile, or onto `hardware` x `nodes` (the
// script's project-config); false, with the reason in session.message, when it cannot.
bool project_launch_form(GuiSession& session);
bool project_launch_form(GuiSession& session, const std::string& hardware, int nodes);
}  // namespace shardscope::gui
