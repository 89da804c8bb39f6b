#include "engine/launch/device_turns.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "profiling/record/host_tracing.h"

namespace shardscope {
namespace {

thread_local bool holds_turn = false;
thread_local bool given_up = false;  // by give_up_until_taken_back()

}  // namespace

DeviceTurns& DeviceTurns::instance() {
  static DeviceTurns turns;
  return turns;
}

void DeviceTurns::share_across_processes(const std::string& lock_path) {
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw std::runtime_error("cannot open the device-turn lock " + lock_path + ": " +
                             std::strerror(errno));
  }
  std::lock_guard<std::mutex> lock(device_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = fd;
}

void DeviceTurns::pin_compute_cores(int compute_cores) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
  }
  std::lock_guard<std::mutex> lock(pinning_);
  compute_cpus_.clear();
  communication_cpus_.clear();
  if (compute_cores < 1 || static_cast<int>(cpus.size()) <= compute_cores) return;
  compute_cpus_.assign(cpus.begin(), cpus.begin() + compute_cores);
  communication_cpus_.assign(cpus.begin() + compute_cores, cpus.end());
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
  // Only the wait is a span: it is the time this rank's device would not have made it wait.
  {
    profiling::ScopedSpan waiting(profiling::Category::kWait, kWaitName);
    device_.lock();
    while (lock_fd_ >= 0 && ::flock(lock_fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  holds_turn = true;
  pin(true);
}

void DeviceTurns::release() {
  if (!holds_turn) return;  // a Release that unwound without taking the turn back
  holds_turn = false;
  pin(false);
  if (lock_fd_ >= 0) ::flock(lock_fd_, LOCK_UN);
  device_.unlock();
}

DeviceTurns::Scope::Scope(bool enabled) {
  if (!enabled || holds_turn) return;
  instance().acquire();
  held_ = true;
}

DeviceTurns::Scope::~Scope() {
  if (held_) instance().release();
}

void DeviceTurns::give_up_until_taken_back() {
  if (!holds_turn) return;
  instance().release();
  given_up = true;
}

void DeviceTurns::take_back() {
  if (!given_up) return;
  given_up = false;
  instance().acquire();
}

DeviceTurns::Release::Release() {
  if (!holds_turn) return;
  instance().release();
  released_ = true;
}

DeviceTurns::Release::~Release() {
  // A wait that throws (a collective that timed out, a peer that died) ends this rank's step:
  // taking the turn back would queue it behind a peer that may hold it for ever, so it does not.
  if (released_ && std::uncaught_exceptions() == 0) instance().acquire();
}

}  // namespace shardscope
