#pragma once

#include <cstdint>
#include <functional>

namespace shardscope {

// On a GPU, autograd runs a backward on a device thread of its own, not on the thread that called
// backward(): the hooks that strategies hang on it (a pre-backward all-gather, a bucket's
// reduce-scatter, the Reducer's callback) run there, and the calling thread waits. On a CPU it
// runs on the calling thread. SHARDSCOPE_BACKWARD_THREAD=1 makes a CPU run behave like a GPU's, for
// tests and diagnosis (not a user option): every rank's backward runs on a second thread that
// carries what autograd carries (PyTorch's thread-local state: the rank's memory tracker, grad
// mode) and none of our own thread-local state, while the rank's thread waits for it.
bool backward_thread_emulated();

// Runs `pass`, a backward (or anything that runs autograd's engine), where autograd on a GPU
// would: on a second thread under the emulation, else here. What it throws is rethrown here.
void run_backward_pass(const std::function<void()>& pass);

// A hook (communication issued or waited on inside backward) calls this: counted for the rank
// when it runs on the emulation's second thread.
void note_hook_on_this_thread();

// This rank thread's backward passes so far: how many ran on a second thread and how many here,
// and how many hooks fired on the second thread.
struct BackwardThreadCounts {
  int64_t passes_on_second_thread = 0;
  int64_t passes_on_own_thread = 0;
  int64_t hooks_off_own_thread = 0;
  // Every backward ran on a second thread (what `run --json` reports as "backward_thread").
  bool all_on_second_thread() const {
    return passes_on_second_thread > 0 && passes_on_own_thread == 0;
  }
};
BackwardThreadCounts backward_thread_counts();
// The passes counted since `before` (a rank thread's counts at the start of its training).
BackwardThreadCounts backward_thread_counts_since(const BackwardThreadCounts& before);

}  // namespace shardscope
