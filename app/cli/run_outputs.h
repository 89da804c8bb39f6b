#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "engine/state/atomic_file.h"

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
// `checkpoints`: a checkpoint directory (--checkpoint-dir, the one --resume names): no output may
// be it or what its checkpoints keep in it (is_checkpoint_entry; a summary written over its
// `latest`, weights over a shard, once left the newest checkpoint unusable, exit 0).
struct InputFile {
  std::string flag;
  std::string path;
  bool checkpoints = false;
};

// Checked before training, so a long run does not end in a write that was bound to fail and never
// writes over what it did not make: missing folders are created; a path that is a directory, under
// a file, or in a folder that cannot be written is refused, and so is one whose name (with the
// temporary ".partial" an output is first written under) is too long; an existing path that is
// not a regular file (a symlink, a FIFO, a device) is refused; two outputs naming one file, or an
// output naming an input, are refused. Each output is then claimed for this process
// (OutputClaim: a second run writing the same file at the same time is refused); hold what is
// returned until the outputs are written. Throws ConfigError naming the flag.
[[nodiscard]] std::vector<OutputClaim> check_output_files(
    const OutputFiles& files, const std::vector<InputFile>& inputs = {});
// One output of another command, by its flag: a trace (a file, or DIR/ for Holistic Trace
// Analysis; project --out) or any other file (view's --screenshot and --state).
struct OutputFile {
  std::string flag;
  std::string path;
  bool trace = false;
  // Whether missing folders above it are made (a run's outputs), or refused (the app's, which
  // may end without writing them).
  bool make_folders = true;
};
// The same checks for those outputs, with the files the command reads.
[[nodiscard]] std::vector<OutputClaim> check_outputs(const std::vector<OutputFile>& outputs,
                                                     const std::vector<InputFile>& inputs);
// The traces a command reads, as inputs an output must not overwrite: each path, and in a trace
// directory the files its reader reads (trace.sst, the PyTorch profiler's .json files).
std::vector<InputFile> trace_inputs(const std::vector<std::string>& traces);
// `--hardware NAME_OR_PATH` as an input, where it names a file (a profile's name reads none).
void add_hardware_input(const std::string& name_or_path, std::vector<InputFile>& inputs);

// One output file (not a trace directory), named by its flag (project --out), and what the
// command reads.
[[nodiscard]] std::vector<OutputClaim> check_output_file(const std::string& flag,
                                                         const std::string& path,
                                                         const std::vector<InputFile>& inputs = {});

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
