#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace shardscope {
struct RunSummary;
}

namespace shardscope::cli {

// The files a run (or a collected run) writes: --json, --trace (a file, or DIR/ for Holistic
// Trace Analysis) and --export-weights (.pt or .safetensors).
struct OutputFiles {
  std::string json;
  std::string trace;
  std::string weights;
};

// A file the run reads, by the flag that names it (--data, --config, --init-weights, --resume).
struct InputFile {
  std::string flag;
  std::string path;
};

// Checked before training, so a long run does not end in a write that was bound to fail and never
// writes over what it did not make: missing folders are created; a path that is a directory, under
// a file, or in a folder that cannot be written is refused, and so is one whose name (with the
// temporary ".partial" an output is first written under) is too long; an existing path that is
// not a regular file (a symlink, a FIFO, a device) is refused; two outputs naming one file, or an
// output naming an input, are refused. Throws ConfigError naming the flag.
void check_output_files(const OutputFiles& files, const std::vector<InputFile>& inputs = {});
// The same checks for one other output file, named by its flag (project --out).
void check_output_file(const std::string& flag, const std::string& path);

// Writes every output, each on its own: one that fails (a full disk) does not keep the others
// from being written. `written` receives a line per file written; the return value one line per
// failure, naming the flag and the file. Weights are written only for a run that finished.
std::vector<std::string> write_output_files(const OutputFiles& files, const RunSummary& summary,
                                            std::vector<std::string>& written);

struct Conclusion;

// The end of a run or a collected run, in the order a user needs it: every output written (each
// on its own), then the run's own outcome (whatever the disk said), then the files that could
// not be written. Returns the exit code: the outcome's, or kExitRunFailed when only a write
// failed.
int write_outputs_and_conclude(const OutputFiles& files, const RunSummary& summary,
                               const Conclusion& how, bool quiet, std::ostream& out,
                               std::ostream& err);

}  // namespace shardscope::cli
