#include "engine/launch/backward_thread.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

namespace shardscope {
namespace {

thread_local BackwardThreadCounts own_counts;
// On the emulation's second thread: the counts of the rank thread it runs for. Our one
// thread-local the second thread is given, and it only counts.
thread_local BackwardThreadCounts* counting_for = nullptr;

// A rank thread's second thread, kept for the rank's life as autograd keeps its device thread:
// a thread made for each backward would pay for a fresh intra-op thread team every time, and the
// emulation would change the run's device time.
class SecondThread {
 public:
  explicit SecondThread(BackwardThreadCounts* counts) : thread_([this, counts] { loop(counts); }) {}
  ~SecondThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  SecondThread(const SecondThread&) = delete;
  SecondThread& operator=(const SecondThread&) = delete;

  // Runs `pass` there with PyTorch's thread-local state and intra-op threads of the caller, and
  // waits for it.
  void run(const std::function<void()>& pass) {
    const at::ThreadLocalState carried;
    const int intra_op_threads = at::get_num_threads();
    std::exception_ptr failure;
    std::function<void()> task = [&] {
      at::ThreadLocalStateGuard guard(carried);
      if (at::get_num_threads() != intra_op_threads) at::set_num_threads(intra_op_threads);
      try {
        pass();
      } catch (...) {
        failure = std::current_exception();
      }
    };
    std::unique_lock<std::mutex> lock(mutex_);
    task_ = &task;
    wake_.notify_all();
    done_.wait(lock, [this] { return task_ == nullptr; });
    lock.unlock();
    if (failure) std::rethrow_exception(failure);
  }

 private:
  void loop(BackwardThreadCounts* counts) {
    counting_for = counts;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || task_ != nullptr; });
      if (task_ == nullptr) return;  // stopping, nothing left
      std::function<void()>* task = task_;
      lock.unlock();
      (*task)();
      lock.lock();
      task_ = nullptr;
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::function<void()>* task_ = nullptr;
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once the rest is made
};

}  // namespace

bool backward_thread_emulated() {
  const char* v = std::getenv("SHARDSCOPE_BACKWARD_THREAD");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

void run_backward_pass(const std::function<void()>& pass) {
  if (counting_for != nullptr) {
    pass();  // already on the second thread (a recomputation's backward inside backward)
    return;
  }
  if (!backward_thread_emulated()) {
    ++own_counts.passes_on_own_thread;
    pass();
    return;
  }
  thread_local SecondThread second(&own_counts);
  second.run(pass);
  ++own_counts.passes_on_second_thread;
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
