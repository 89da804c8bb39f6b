#include "engine/launch/stop_request.h"

#include <atomic>
#include <csignal>
#include <cstring>

#include <signal.h>
#include <unistd.h>

namespace shardscope {
namespace {

std::atomic<int> requested{0};
std::atomic<bool> escalate_on_repeat{false};
static_assert(std::atomic<int>::is_always_lock_free, "used from a signal handler");

void on_signal(int signal_number) {
  if (requested.load() != 0 && escalate_on_repeat.load()) {
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
    return;
  }
  int expected = 0;
  if (requested.compare_exchange_strong(expected, signal_number)) {
    const char* text = escalate_on_repeat.load()
                           ? "\nshardscope: stopping after this step (again to stop at once)\n"
                           : "";
    if (*text != '\0') {
      [[maybe_unused]] ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
    }
  }
}

}  // namespace

void request_stop(int signal_number) {
  int expected = 0;
  requested.compare_exchange_strong(expected, signal_number);
}

int stop_requested() {
  return requested.load(std::memory_order_relaxed);
}

void clear_stop_request() {
  requested.store(0);
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void install_stop_signal_handlers(bool escalate) {
  escalate_on_repeat.store(escalate);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // A launcher starts its rank processes with these blocked (a stop before the handler existed
  // would have killed them); one that arrived meanwhile is delivered now.
  const sigset_t stop_signals = stop_signal_set();
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
}

}  // namespace shardscope
