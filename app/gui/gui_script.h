#pragma once

#include <string>
#include <vector>

namespace shardscope::gui {

// A GUI script: one action per line, '#' starts a comment, "double quotes" keep spaces in one
// argument. Actions:
//   open PATH | save PATH | tab NAME | run-select INDEX
//   lens measured | lens device [HARDWARE]        (the timeline: wall clock or device time)
//   range T0_MS T1_MS | fit | fit-step N | search TEXT
//   mouse X Y | click X Y | drag X0 Y0 X1 Y1 [left|right] | wheel X Y DELTA
//   hover RANK NAME [K]   move the mouse onto the K-th event NAME of rank RANK
//   select RANK NAME [K]  hover it and click
//   set KEY VALUE | run | wait-runs | stop        (the Launch form and queue)
//   resume ID             queue the run that continues run ID from its checkpoints
//   wait-live                                      until the running run's timeline shows
//   project [HARDWARE [COMPUTE_SCALE [fp32|bf16]]] (the What-if panel; the precision priced)
//   frames N | screenshot FILE | state FILE
struct ScriptAction {
  std::string verb;
  std::vector<std::string> args;
  int line = 0;
};
// Throws std::runtime_error naming the line for an unknown verb or wrong argument count.
std::vector<ScriptAction> parse_script(const std::string& text);
// The script in the file at `path`, checked first for what it is (a FIFO, a folder, too large):
// throws std::runtime_error saying why it cannot be read, or naming the line.
std::vector<ScriptAction> read_script_file(const std::string& path);

}  // namespace shardscope::gui
