#pragma once

namespace shardscope::cli {

// Exit codes of the shardscope binary.
enum ExitCode : int {
  kExitOk = 0,
  kExitRunFailed = 1,  // a rank failed, or output could not be written
  kExitBadInput = 2,   // bad flag, bad config: nothing was started
  kExitMismatch = 3,   // the run finished but does not match the single-device reference
  // Ctrl-C or SIGTERM stopped training early, after a consistent step: 128 + the signal, as a
  // shell reports a process the signal ended (130, 143), so a scheduler requeues it.
  kExitStoppedBySignal = 128,
};

}  // namespace shardscope::cli
