#include "app/analysis/trace_open.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "app/analysis/trace_output.h"
#include "engine/train/config.h"
#include "profiling/io/kineto_reader.h"
#include "profiling/io/trace_io.h"

namespace shardscope::analysis {
namespace {

// A trace of ours carries the config it ran; one edited to a config that could not have run
// (heads 0, experts 1e9, a negative width) once divided by zero or ran out of memory in
// `project`, and drew as if valid elsewhere. Refused naming the trace and the key. A config this
// version cannot read at all (another version's keys) is read as none, as before.
void check_recorded_config(const profiling::Trace& trace, const std::string& path) {
  if (!trace.run.has_config()) return;
  Config config;
  try {
    config = config_from_json(nlohmann::json::parse(trace.run.config_json));
  } catch (const std::exception&) {
    return;
  }
  try {
    validate_structure(config);
  } catch (const ConfigError& e) {
    throw profiling::TraceFormatError(path +
                                      ": its recorded config could not have run: " + e.what());
  }
}

profiling::Trace read_trace_at(const std::string& path) {
  namespace fs = std::filesystem;
  using profiling::TraceFormatError;
  std::error_code ec;
  if (path.empty()) throw TraceFormatError("no file given");
  if (!fs::exists(path, ec) && !is_trace_directory(path)) {
    throw TraceFormatError("cannot open trace file '" + path + "': it does not exist");
  }
  if (is_trace_directory(path)) {
    // A folder is read through the trace.sst that `run --trace DIR/` leaves in it.
    const std::string file = native_trace_in(path);
    if (!fs::exists(file, ec)) {
      // A folder of the PyTorch profiler's traces, one file per rank of a job.
      if (const auto kineto = profiling::kineto_files_in(path); !kineto.empty())
        return profiling::read_kineto_files(kineto);
      if (fs::exists(fs::path(path) / "config.json", ec)) {
        // The workers' --out folder of a torchrun or scheduler run: collect makes it a run.
        throw TraceFormatError(path + " is the --out folder of `shardscope worker`, not a trace: " +
                               "shardscope collect " + path + " --trace FILE");
      }
      throw TraceFormatError(path +
                             " is a directory without trace.sst or PyTorch profiler traces "
                             "(*.json, *.json.gz): give a trace file, or a folder of them");
    }
    return profiling::read_trace_file(file);
  }
  return profiling::read_trace_file(path);
}

}  // namespace

profiling::Trace open_trace_path(const std::string& path) {
  profiling::Trace trace = read_trace_at(path);
  check_recorded_config(trace, path);
  return trace;
}

profiling::Trace open_trace_paths(const std::vector<std::string>& paths) {
  using profiling::TraceFormatError;
  if (paths.size() == 1) return open_trace_path(paths.front());
  if (paths.empty()) throw TraceFormatError("no file given");
  namespace fs = std::filesystem;
  for (const auto& p : paths) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) {
      throw TraceFormatError(p + (fs::exists(p, ec) ? " is not a file" : " does not exist") +
                             ": several traces are the PyTorch profiler's files of one job, one "
                             "a rank");
    }
    const std::string name = fs::path(p).filename().string();
    const auto ends = [&](const std::string& s) {
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (!ends(".json") && !ends(".json.gz")) {
      throw TraceFormatError(p +
                             " is no PyTorch profiler trace (*.json, *.json.gz): several "
                             "traces are the profiler's files of one job, one a rank");
    }
  }
  return profiling::read_kineto_files(paths);
}

std::string ranks_text(const profiling::Trace& trace) {
  const int drawn = int(trace.ranks.size());
  std::string text = std::to_string(drawn) + " ranks";
  if (trace.run.projected && trace.run.world > drawn)
    text += " drawn of world " + std::to_string(trace.run.world) + " (the others repeat them)";
  return text;
}

}  // namespace shardscope::analysis
