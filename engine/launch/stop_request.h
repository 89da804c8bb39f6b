#pragma once

#include <signal.h>

namespace shardscope {

// A request to stop training at the next step boundary: Ctrl-C, SIGTERM (a preempted machine),
// or the GUI's Stop. Every rank of a run reads it at the end of each step, and the ranks agree
// (one flag rides on the step's loss all-gather), so they all stop after the same step, write a
// checkpoint when a directory is set, and end normally with their trace.
void request_stop(int signal_number);  // async-signal-safe
int stop_requested();                  // 0, or the signal that asked (SIGINT, SIGTERM, ...)
void clear_stop_request();

// Makes SIGINT and SIGTERM request a stop, and unblocks them on the calling thread (call it
// before starting threads). With `escalate`, a second signal ends the process at once (the user
// insists); rank processes leave escalation to their launcher, which forwards the first signal
// to them.
void install_stop_signal_handlers(bool escalate);

// SIGINT and SIGTERM, the signals that request a stop (a launcher blocks them in a rank process
// until its handler is installed).
sigset_t stop_signal_set();

}  // namespace shardscope
