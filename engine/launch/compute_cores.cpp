#include "engine/launch/compute_cores.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

namespace shardscope {
namespace {

struct Claim {
  std::mutex mutex;
  std::vector<int> cores;
  std::vector<int> fds;  // the locks, open for as long as the claim holds
  pid_t owner = 0;       // the process that claimed
  void release() {
    // Closing lets go of a lock once no process has it open. A forked child that closes what it
    // inherited leaves its parent's claim standing: the claim is the parent's, not the child's.
    for (int fd : fds) ::close(fd);
    fds.clear();
    cores.clear();
  }
};

Claim& this_process_claim() {
  static Claim claim;
  return claim;
}

// The folder of the locks: this user's own, or none (a folder of that name that someone else
// made, or a link, is not trusted with anything).
std::string lock_folder() {
  const std::string dir = "/tmp/shardscope-cores-" + std::to_string(::geteuid());
  ::mkdir(dir.c_str(), 0700);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) return {};
  return dir;
}

}  // namespace

std::vector<int> allowed_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
  }
  return cpus;
}

std::vector<int> claim_compute_cores(const std::vector<int>& allowed, int count) {
  return claim_compute_cores_in(lock_folder(), allowed, count);
}

std::vector<int> claim_compute_cores_in(const std::string& dir, const std::vector<int>& allowed,
                                        int count) {
  const std::vector<int> first(allowed.begin(),
                               allowed.begin() + std::min<size_t>(allowed.size(), count));
  Claim& claim = this_process_claim();
  std::lock_guard<std::mutex> lock(claim.mutex);
  if (claim.owner != ::getpid()) claim.release();  // inherited across a fork: not this process's
  if (static_cast<int>(claim.cores.size()) == count &&
      std::all_of(claim.cores.begin(), claim.cores.end(), [&](int c) {
        return std::find(allowed.begin(), allowed.end(), c) != allowed.end();
      }))
    return claim.cores;
  claim.release();
  claim.owner = ::getpid();
  if (dir.empty() || count < 1) return first;
  for (int core : allowed) {
    if (static_cast<int>(claim.cores.size()) == count) break;
    const std::string path = dir + "/cpu-" + std::to_string(core);
    const int fd =
        ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0) continue;  // not ours to lock (a link; O_NONBLOCK: a FIFO put there opens)
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);  // another run computes there
      continue;
    }
    claim.fds.push_back(fd);
    claim.cores.push_back(core);
  }
  if (static_cast<int>(claim.cores.size()) < count) {
    claim.release();
    return first;
  }
  return claim.cores;
}

std::string compute_cores_text(const std::vector<int>& cores) {
  std::string text;
  for (int c : cores) text += (text.empty() ? "" : ",") + std::to_string(c);
  return text;
}

std::vector<int> compute_cores_from_environment() {
  const char* text = std::getenv(kComputeCoresVariable);
  return text == nullptr ? std::vector<int>{} : compute_cores_of(text);
}

std::vector<int> compute_cores_of(const std::string& s) {
  std::vector<int> cores;
  size_t at = 0;
  while (at < s.size()) {
    const size_t end = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, end - at);
    char* stop = nullptr;
    const long core = std::strtol(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || core < 0 || core >= CPU_SETSIZE) return {};
    cores.push_back(static_cast<int>(core));
    at = end + 1;
  }
  if (!s.empty() && s.back() == ',') return {};
  return cores;
}

}  // namespace shardscope
