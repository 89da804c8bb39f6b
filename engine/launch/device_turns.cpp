#include "engine/launch/device_turns.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "engine/launch/compute_cores.h"
#include "profiling/record/host_tracing.h"

// glibc before 2.37 names the thread of a SIGEV_THREAD_ID event only by its inner field.
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

namespace shardscope {
namespace {

thread_local DeviceTurns::TurnState thread_turn;

std::atomic<int64_t> wait_limit_ms{60'000};

// The signal that wakes a thread blocked in flock: its handler does nothing, and without
// SA_RESTART the flock returns EINTR, so the waiter can look at the clock.
int wake_signal() {
  static const int signo = [] {
    const int s = SIGRTMIN + 3;
    struct sigaction action {};
    action.sa_handler = [](int) {};
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    ::sigaction(s, &action, nullptr);
    return s;
  }();
  return signo;
}

// Wakes this thread (it alone: SIGEV_THREAD_ID) every `period` while it lives, with the wake
// signal unblocked on it. The common case, a turn free at once, never makes one.
class WakeTimer {
 public:
  explicit WakeTimer(std::chrono::milliseconds period) {
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, wake_signal());
    ::pthread_sigmask(SIG_UNBLOCK, &wake, &old_mask_);
    sigevent event{};
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = wake_signal();
    event.sigev_notify_thread_id = static_cast<pid_t>(::gettid());
    if (::timer_create(CLOCK_MONOTONIC, &event, &timer_) != 0) return;
    armed_ = true;
    itimerspec spec{};
    spec.it_value.tv_sec = period.count() / 1000;
    spec.it_value.tv_nsec = (period.count() % 1000) * 1'000'000;
    spec.it_interval = spec.it_value;
    ::timer_settime(timer_, 0, &spec, nullptr);
  }
  ~WakeTimer() {
    if (armed_) ::timer_delete(timer_);
    ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  WakeTimer(const WakeTimer&) = delete;
  WakeTimer& operator=(const WakeTimer&) = delete;

 private:
  timer_t timer_{};
  bool armed_ = false;
  sigset_t old_mask_{};
};

}  // namespace

DeviceTurns& DeviceTurns::instance() {
  static DeviceTurns turns;
  return turns;
}

void DeviceTurns::set_wait_limit(std::chrono::milliseconds limit) {
  wait_limit_ms = limit.count();
}

void DeviceTurns::share_across_processes(const std::string& lock_path, int rank) {
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw std::runtime_error("cannot open the device-turn lock " + lock_path + ": " +
                             std::strerror(errno));
  }
  std::lock_guard<std::mutex> lock(device_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = fd;
  rank_ = rank;
  one_rank_per_process_ = true;
  rank_log_ = profiling::current_rank_log();
}

DeviceTurns::TurnState& DeviceTurns::turn_of_this_rank() {
  return one_rank_per_process_ ? process_turn_ : thread_turn;
}

std::string DeviceTurns::holder() const {
  char text[64] = {};
  const ssize_t n = ::pread(lock_fd_, text, sizeof text - 1, 0);
  std::string who(text, n > 0 ? static_cast<size_t>(n) : 0);
  while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
  return who.empty() ? "another rank" : who;
}

void DeviceTurns::take_file_lock() {
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const auto limit = std::chrono::milliseconds(wait_limit_ms.load());
    const auto start = std::chrono::steady_clock::now();
    WakeTimer wake(std::chrono::milliseconds(200));
    while (::flock(lock_fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        throw std::runtime_error(std::string("cannot take the device-turn lock: ") +
                                 std::strerror(errno));
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      if (limit.count() > 0 && waited > limit) {
        const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(waited).count();
        throw std::runtime_error("waited " + std::to_string(seconds) +
                                 " s for the shared device's turn, which " + holder() +
                                 " holds and has not given up (stopped, or hung while computing)");
      }
    }
  }
  // Who holds the turn, for a peer that waits too long for it.
  const std::string me = (rank_ >= 0 ? "rank " + std::to_string(rank_) : std::string("a rank")) +
                         " (pid " + std::to_string(::getpid()) + ")\n";
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, me.data(), me.size(), 0) < 0) {
    // Only a waiter's message loses the name; the turn itself is held.
  }
}

void DeviceTurns::pin_compute_cores(int compute_cores) {
  const std::vector<int> cpus = allowed_cores();
  std::vector<int> compute;
  if (compute_cores >= 1 && static_cast<int>(cpus.size()) > compute_cores) {
    if (one_rank_per_process_) {
      // A rank process computes where its launcher claimed (the ranks take turns there), or,
      // started by another launcher (torchrun), on the first cores as every rank of its job.
      for (int c : compute_cores_from_environment()) {
        if (std::find(cpus.begin(), cpus.end(), c) != cpus.end()) compute.push_back(c);
      }
      if (static_cast<int>(compute.size()) != compute_cores)
        compute.assign(cpus.begin(), cpus.begin() + compute_cores);
    } else {
      compute = claim_compute_cores(cpus, compute_cores);
    }
  }
  std::lock_guard<std::mutex> lock(pinning_);
  compute_cpus_ = compute;
  communication_cpus_.clear();
  if (compute.empty()) return;
  for (int c : cpus) {
    if (std::find(compute.begin(), compute.end(), c) == compute.end())
      communication_cpus_.push_back(c);
  }
}

void DeviceTurns::keep_to_communication_cores() {
  instance().pin(false);
}

void DeviceTurns::pin(bool computing) {
  std::lock_guard<std::mutex> lock(pinning_);
  const std::vector<int>& cpus = computing ? compute_cpus_ : communication_cpus_;
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);  // best effort: a hint
}

void DeviceTurns::acquire() {
  // Only the wait is a span: it is the time this rank's device would not have made it wait. A
  // thread of the rank without a log of its own (autograd's) records it in the rank's.
  {
    profiling::RankLogScope log(profiling::current_rank_log() != nullptr
                                    ? profiling::current_rank_log()
                                    : rank_log_.load());
    profiling::ScopedSpan waiting(profiling::Category::kWait, kWaitName);
    std::unique_lock<std::mutex> lock(device_);
    device_free_.wait(lock, [this] { return !device_taken_; });
    device_taken_ = true;
    lock.unlock();
    if (lock_fd_ >= 0) {
      try {
        take_file_lock();
      } catch (...) {
        free_device();
        throw;
      }
    }
  }
  turn_of_this_rank().holds = true;
  pin(true);
}

void DeviceTurns::free_device() {
  {
    std::lock_guard<std::mutex> lock(device_);
    device_taken_ = false;
  }
  device_free_.notify_one();
}

bool DeviceTurns::drains_gpu(bool cuda) {
  const char* drain = std::getenv("SHARDSCOPE_TURN_DRAIN");
  return cuda && (drain == nullptr || std::strcmp(drain, "0") != 0);
}

void DeviceTurns::drain_before_release(std::function<void()> drain) {
  std::lock_guard<std::mutex> lock(draining_);
  drain_ = std::move(drain);
}

void DeviceTurns::release() {
  // exchange: of two threads of a rank that both wait, only one gives the turn up.
  if (!turn_of_this_rank().holds.exchange(false)) return;
  std::function<void()> drain;
  {
    std::lock_guard<std::mutex> lock(draining_);
    drain = drain_;
  }
  if (drain) drain();  // still this rank's turn: nobody else's kernels start beside its own
  pin(false);
  if (lock_fd_ >= 0) ::flock(lock_fd_, LOCK_UN);
  free_device();
}

DeviceTurns::Scope::Scope(bool enabled) {
  if (!enabled || instance().turn_of_this_rank().holds) return;
  instance().acquire();
  held_ = true;
}

DeviceTurns::Scope::~Scope() {
  if (held_) instance().release();
}

void DeviceTurns::give_up_until_taken_back() {
  DeviceTurns& turns = instance();
  if (!turns.turn_of_this_rank().holds) return;
  turns.release();
  turns.turn_of_this_rank().given_up = true;
}

void DeviceTurns::take_back() {
  DeviceTurns& turns = instance();
  if (!turns.turn_of_this_rank().given_up.exchange(false)) return;
  turns.acquire();
}

DeviceTurns::Release::Release() {
  if (!instance().turn_of_this_rank().holds) return;
  instance().release();
  released_ = true;
}

DeviceTurns::Release::~Release() noexcept(false) {
  // A wait that throws (a collective that timed out, a peer that died) ends this rank's step:
  // taking the turn back would queue it behind a peer that may hold it for ever, so it does not.
  if (released_ && std::uncaught_exceptions() == 0) instance().acquire();
}

}  // namespace shardscope
