#include "app/cli/run_outputs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>

#include <nlohmann/json.hpp>

#include "app/analysis/trace_output.h"
#include "app/cli/exit_code.h"
#include "app/cli/run_summary_text.h"
#include "engine/state/atomic_file.h"
#include "engine/state/weights_file.h"
#include "engine/train/config.h"
#include "engine/train/run.h"

namespace shardscope::cli {
namespace {

namespace fs = std::filesystem;

bool is_directory(const std::string& path) {
  struct stat s {};
  return stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

// Makes `folder` (and its parents) exist and be writable, or says why it cannot.
std::string folder_problem(const std::string& folder) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return "cannot create the folder " + folder + ": " + ec.message();
  if (!is_directory(folder)) return folder + " is not a folder";
  if (access(folder.c_str(), W_OK) != 0)
    return "cannot write in " + folder + ": " + std::strerror(errno);
  return "";
}

// Why the file `path` cannot be written, or "".
std::string file_problem(const std::string& path) {
  if (is_directory(path)) return path + " is a directory, not a file";
  const fs::path parent = fs::path(path).parent_path();
  if (std::string why = folder_problem(parent.empty() ? "." : parent.string()); !why.empty())
    return why;
  if (access(path.c_str(), F_OK) == 0 && access(path.c_str(), W_OK) != 0)
    return "cannot write " + path + ": " + std::strerror(errno);
  return "";
}

void require_writable(const std::string& flag, const std::string& problem) {
  if (!problem.empty()) throw ConfigError(flag, problem);
}

}  // namespace

void check_output_files(const OutputFiles& files) {
  if (!files.json.empty()) require_writable("--json", file_problem(files.json));
  if (!files.weights.empty()) require_writable("--export-weights", file_problem(files.weights));
  if (files.trace.empty()) return;
  require_writable("--trace", analysis::trace_target_problem(files.trace));
  require_writable("--trace", analysis::is_trace_directory(files.trace)
                                  ? folder_problem(files.trace)
                                  : file_problem(files.trace));
}

std::vector<std::string> write_output_files(const OutputFiles& files, const RunSummary& summary,
                                            std::vector<std::string>& written) {
  std::vector<std::string> failures;
  auto attempt = [&](const std::string& flag, const std::string& path, auto&& write) {
    if (path.empty()) return;
    try {
      written.push_back(write());
    } catch (const std::exception& e) {
      failures.push_back(flag + " " + path + ": " + e.what());
    }
  };
  attempt("--json", files.json, [&] {
    write_file_atomically(files.json, summary_to_json(summary).dump(2) + "\n");
    return "summary written to " + files.json;
  });
  // Also for a failed run: what was recorded up to the failure is what explains it.
  attempt("--trace", files.trace, [&] {
    return analysis::write_trace(summary.trace, files.trace) + " (" +
           std::to_string(summary.trace.event_count()) + " events)";
  });
  if (summary.ok && summary.stopped_by_signal == 0) {
    attempt("--export-weights", files.weights, [&] {
      write_weights_file(files.weights, summary.weights);
      return "weights written to " + files.weights;
    });
  }
  return failures;
}

int write_outputs_and_conclude(const OutputFiles& files, const RunSummary& summary,
                               const Conclusion& how, bool quiet, std::ostream& out,
                               std::ostream& err) {
  std::vector<std::string> written;
  const std::vector<std::string> failed_writes = write_output_files(files, summary, written);
  const int code = conclude_run(summary, how, out, err);
  if (!quiet)
    for (const auto& line : written) out << line << "\n";
  for (const auto& failure : failed_writes) err << "error: cannot write " << failure << "\n";
  return failed_writes.empty() || code != kExitOk ? code : kExitRunFailed;
}

}  // namespace shardscope::cli
