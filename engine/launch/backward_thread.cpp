#include "engine/launch/backward_thread.h"

#include <ATen/ThreadLocalState.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

namespace shardscope {
namespace {

thread_local BackwardThreadCounts own_counts;
// On the emulation's second thread: the counts of the rank thread it runs for. Our one
// thread-local the second thread is given, and it only counts.
thread_local BackwardThreadCounts* counting_for = nullptr;

}  // namespace

bool backward_thread_emulated() {
  static const bool on = [] {
    const char* v = std::getenv("SHARDSCOPE_BACKWARD_THREAD");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

void run_backward_pass(const std::function<void()>& pass) {
  if (!backward_thread_emulated() || counting_for != nullptr) {
    // Off, or already on the second thread (a recomputation's backward inside backward).
    if (counting_for == nullptr) ++own_counts.passes_on_own_thread;
    pass();
    return;
  }
  // What autograd carries over to its device thread: PyTorch's thread-local state.
  const at::ThreadLocalState carried;
  BackwardThreadCounts* counts = &own_counts;
  std::exception_ptr failure;
  std::thread second([&] {
    at::ThreadLocalStateGuard guard(carried);
    counting_for = counts;
    try {
      pass();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  second.join();
  ++own_counts.passes_on_second_thread;
  if (failure) std::rethrow_exception(failure);
}

void note_hook_on_this_thread() {
  if (counting_for != nullptr) ++counting_for->hooks_off_own_thread;
}

BackwardThreadCounts backward_thread_counts() {
  return own_counts;
}

BackwardThreadCounts backward_thread_counts_since(const BackwardThreadCounts& before) {
  return {own_counts.passes_on_second_thread - before.passes_on_second_thread,
          own_counts.passes_on_own_thread - before.passes_on_own_thread,
          own_counts.hooks_off_own_thread - before.hooks_off_own_thread};
}

}  // namespace shardscope
