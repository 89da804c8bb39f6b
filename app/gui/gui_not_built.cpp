// `gui` and `view` in a build without the desktop app (SHARDSCOPE_BUILD_GUI=OFF): a clear error,
// and every other subcommand works as usual.
#include "app/gui/gui_app.h"

namespace shardscope::gui {

namespace {
constexpr const char* kNotBuilt =
    "this shardscope was built without the desktop app (SHARDSCOPE_BUILD_GUI=OFF); rebuild with "
    "it ON, which needs GLFW, Dear ImGui and stb (scripts/install-deps.sh installs them), or open "
    "the trace with a shardscope that has it";
}  // namespace

int gui_main(const GuiOptions&, std::ostream&, std::ostream& err) {
  err << "error: " << kNotBuilt << "\n";
  return 2;
}

bool have_display(std::string* why) {
  if (why != nullptr) *why = kNotBuilt;
  return false;
}

}  // namespace shardscope::gui
