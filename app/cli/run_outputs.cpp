#include "app/cli/run_outputs.h"

#include <fcntl.h>
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
#include "engine/state/checkpoint.h"
#include "engine/state/weights_file.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "profiling/io/kineto_reader.h"

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

// Whether the name `path` + ".partial" (what write_file_atomically writes first) can be made in
// its folder: a name the file system refuses is found now, not after training.
std::string temporary_name_problem(const std::string& path) {
  const std::string tmp = path + ".partial";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return "";
  }
  if (errno == EEXIST) return "";  // a leftover of an interrupted write: it will be replaced
  if (errno == ENAMETOOLONG)
    return "the file name " + fs::path(path).filename().string() +
           " is too long once its temporary suffix .partial is added";
  return "cannot write " + tmp + ": " + std::strerror(errno);
}

// Why the file `path` cannot be written, or "".
std::string file_problem(const std::string& path, bool make_folders = true) {
  if (!path.empty() && path.back() == '/')
    return path + " names a folder (it ends in /): name a file";
  struct stat s {};
  if (lstat(path.c_str(), &s) == 0) {
    if (S_ISDIR(s.st_mode)) return path + " is a directory, not a file";
    if (S_ISLNK(s.st_mode))
      return path + " is a symlink: name the file itself (an output replaces what is at its path)";
    if (!S_ISREG(s.st_mode))
      return path +
             " is not a regular file (a FIFO, a device or a socket): an output replaces "
             "what is at its path";
  }
  if (is_directory(path)) return path + " is a directory, not a file";
  const fs::path parent = fs::path(path).parent_path();
  if (!make_folders && !parent.empty() && !is_directory(parent.string()))
    return "no folder " + parent.string();
  if (std::string why = folder_problem(parent.empty() ? "." : parent.string()); !why.empty())
    return why;
  if (access(path.c_str(), F_OK) == 0 && access(path.c_str(), W_OK) != 0)
    return "cannot write " + path + ": " + std::strerror(errno);
  return temporary_name_problem(path);
}

// The same file however it is spelled (./x, a/../x, through a symlinked folder).
std::string canonical(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  std::string where = ec ? path : p.string();
  while (where.size() > 1 && where.back() == '/') where.pop_back();  // "DIR/" is DIR
  return where;
}

// Where an output lands: the file, or for a trace directory the directory, whose files of
// write_trace's names it writes or removes.
struct Claim {
  std::string flag, path, canonical;
  bool directory = false;
};

// Whether writing `a` would write over (or remove) what `b` names, a file.
bool lands_on(const Claim& a, const Claim& b) {
  if (a.canonical == b.canonical) return true;
  if (!a.directory || b.directory) return false;
  const fs::path file(b.canonical);
  return file.parent_path().string() == a.canonical &&
         analysis::written_into_trace_directory(file.filename().string());
}

// Two outputs on one file, or an output over an input: refused before anything is written.
void require_distinct(const std::vector<OutputFile>& outputs,
                      const std::vector<InputFile>& inputs) {
  std::vector<Claim> claims;
  for (const OutputFile& o : outputs) {
    if (o.path.empty()) continue;
    const bool directory = o.trace && analysis::is_trace_directory(o.path);
    claims.push_back({o.flag, o.path, canonical(o.path), directory});
  }
  for (size_t i = 0; i < claims.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (lands_on(claims[i], claims[j]) || lands_on(claims[j], claims[i]))
        throw ConfigError(claims[i].flag, claims[i].path + " is also " + claims[j].flag +
                                              "'s output: give each output its own file");
    }
    for (const InputFile& input : inputs) {
      if (input.path.empty()) continue;
      if (input.checkpoints) {
        const std::string root = canonical(input.path);
        const std::string& at = claims[i].canonical;
        if (at == root ||
            (at.rfind(root + "/", 0) == 0 && is_checkpoint_entry(at.substr(root.size() + 1))))
          throw ConfigError(claims[i].flag, claims[i].path + " is a checkpoint's file in " +
                                                input.flag + " " + input.path +
                                                ": an output would ruin it; give it a place "
                                                "outside the checkpoints");
        continue;
      }
      if (lands_on(claims[i], {input.flag, input.path, canonical(input.path), false}))
        throw ConfigError(claims[i].flag, claims[i].path + " is the " + input.flag +
                                              " input: an output would overwrite it");
    }
  }
}

void require_writable(const std::string& flag, const std::string& problem) {
  if (!problem.empty()) throw ConfigError(flag, problem);
}

}  // namespace

std::vector<OutputClaim> check_outputs(const std::vector<OutputFile>& outputs,
                                       const std::vector<InputFile>& inputs) {
  require_distinct(outputs, inputs);
  for (const OutputFile& o : outputs) {
    if (o.path.empty()) continue;
    if (!o.trace) {
      require_writable(o.flag, file_problem(o.path, o.make_folders));
      continue;
    }
    require_writable(o.flag, analysis::trace_target_problem(o.path));
    require_writable(o.flag, analysis::is_trace_directory(o.path) ? folder_problem(o.path)
                                                                  : file_problem(o.path));
  }
  std::vector<OutputClaim> claims;
  for (const OutputFile& o : outputs) {
    if (o.path.empty()) continue;
    const bool directory = o.trace && analysis::is_trace_directory(o.path);
    try {
      claims.emplace_back(directory ? analysis::native_trace_in(o.path) : o.path);
    } catch (const std::runtime_error& e) {
      throw ConfigError(o.flag, e.what());
    }
  }
  return claims;
}

void add_hardware_input(const std::string& name_or_path, std::vector<InputFile>& inputs) {
  std::error_code ec;
  if (!name_or_path.empty() && fs::exists(name_or_path, ec))
    inputs.push_back({"--hardware", name_or_path});
}

std::vector<InputFile> trace_inputs(const std::vector<std::string>& traces) {
  std::vector<InputFile> inputs;
  std::error_code ec;
  for (const auto& path : traces) {
    inputs.push_back({"trace", path});
    if (!fs::is_directory(path, ec)) continue;
    inputs.push_back({"trace", analysis::native_trace_in(path)});
    for (const auto& file : profiling::kineto_files_in(path)) inputs.push_back({"trace", file});
  }
  return inputs;
}

std::vector<OutputClaim> check_output_files(const OutputFiles& files,
                                            const std::vector<InputFile>& inputs) {
  return check_outputs(
      {{"--json", files.json}, {"--export-weights", files.weights}, {"--trace", files.trace, true}},
      inputs);
}

std::vector<OutputClaim> check_output_file(const std::string& flag, const std::string& path,
                                           const std::vector<InputFile>& inputs) {
  return check_outputs({{flag, path, false}}, inputs);
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
