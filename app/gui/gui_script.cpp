#include "app/gui/gui_script.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "profiling/io/input_file.h"

#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace shardscope::gui {

namespace {

// `range T0 T1` in milliseconds: NaN, infinity or a span of 1e300 once grew the timeline's tick
// list until the process died. A time beyond a year (3.2e10 ms) is no time of a trace.
void check_range(const ScriptAction& action) {
  constexpr double kLongestMs = 3.2e10;
  double t[2];
  for (int i = 0; i < 2; ++i) {
    const std::string& s = action.args[static_cast<size_t>(i)];
    size_t used = 0;
    try {
      t[i] = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || !std::isfinite(t[i]) || std::fabs(t[i]) > kLongestMs) {
      throw std::runtime_error("script line " + std::to_string(action.line) + ": '" + action.verb +
                               "' takes two finite times in milliseconds within a year, "
                               "got '" +
                               s + "'");
    }
  }
  if (!(t[0] < t[1])) {
    throw std::runtime_error("script line " + std::to_string(action.line) + ": '" + action.verb +
                             "' needs its start before its end");
  }
}

// `frames N`: a whole number of frames up to a minute's (3600); 100000 once held the app for half
// an hour, and "-5" or "abc" failed only once the window was up.
void check_frames(const ScriptAction& action) {
  const std::string& s = action.args[0];
  const bool digits =
      !s.empty() && s.size() <= 4 && s.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(s) > 3600) {
    throw std::runtime_error("script line " + std::to_string(action.line) +
                             ": 'frames' takes a whole number of frames from 0 to 3600, got '" + s +
                             "'");
  }
}

}  // namespace

std::vector<ScriptAction> parse_script(const std::string& text) {
  // verb -> (fewest, most) arguments.
  static const std::map<std::string, std::pair<size_t, size_t>> arity = {
      {"open", {1, 1}},       {"save", {1, 1}},       {"tab", {1, 1}},
      {"run-select", {1, 1}}, {"lens", {1, 2}},       {"range", {2, 2}},
      {"fit", {0, 0}},        {"fit-step", {1, 1}},   {"search", {0, 1}},
      {"mouse", {2, 2}},      {"click", {2, 2}},      {"drag", {4, 5}},
      {"wheel", {3, 3}},      {"hover", {2, 3}},      {"select", {2, 3}},
      {"set", {2, 2}},        {"run", {0, 0}},        {"wait-runs", {0, 0}},
      {"wait-live", {0, 0}},  {"stop", {0, 0}},       {"project", {0, 3}},
      {"frames", {1, 1}},     {"screenshot", {1, 1}}, {"state", {1, 1}},
      {"resume", {1, 1}},     {"key", {1, 1}},        {"fold", {1, 1}},
      {"pin", {1, 1}},        {"measure", {2, 2}},    {"project-config", {1, 2}}};
  std::vector<ScriptAction> actions;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    ScriptAction action;
    action.line = number;
    if (!(words >> action.verb)) continue;
    // "quoted words" are one argument (event names have spaces).
    for (std::string w; words >> std::quoted(w);) action.args.push_back(w);
    auto it = arity.find(action.verb);
    if (it == arity.end()) {
      throw std::runtime_error("script line " + std::to_string(number) + ": unknown action '" +
                               action.verb + "'");
    }
    if (action.args.size() < it->second.first || action.args.size() > it->second.second) {
      throw std::runtime_error("script line " + std::to_string(number) + ": '" + action.verb +
                               "' takes " + std::to_string(it->second.first) +
                               (it->second.first == it->second.second
                                    ? ""
                                    : " to " + std::to_string(it->second.second)) +
                               " arguments");
    }
    if (action.verb == "range" || action.verb == "measure") check_range(action);
    if (action.verb == "frames") check_frames(action);
    actions.push_back(std::move(action));
  }
  return actions;
}

std::vector<ScriptAction> read_script_file(const std::string& path) {
  if (const std::string why =
          profiling::input_file_problem(path, profiling::kMaxTextInputBytes, "script");
      !why.empty())
    throw std::runtime_error(why);
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_script(text.str());
}

}  // namespace shardscope::gui
