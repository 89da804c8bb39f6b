#pragma once

#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace shardscope::profiling {

// The lock of a rank's event log and memory tracker, taken on every recorded event and every
// allocation of a traced rank. Its critical sections are a few stores, and the rank's own
// thread rarely meets another there (a backend's completion stamp, a block freed on another
// rank's thread), so uncontended cost is what matters: one atomic exchange to take it and a
// plain store to give it back, where std::mutex pays two atomic read-modify-writes and calls.
// A waiter spins briefly, then yields, so that a holder descheduled on a shared core gets its
// core back.
class SpinLock {
 public:
  void lock() {
    int spins = 0;
    while (held_.exchange(true, std::memory_order_acquire)) {
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          pause();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpinsBeforeYield = 64;
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }

  std::atomic<bool> held_{false};
};

}  // namespace shardscope::profiling
