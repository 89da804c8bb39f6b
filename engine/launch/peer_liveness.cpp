#include "engine/launch/peer_liveness.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <vector>

namespace shardscope {
namespace {

std::string key_of(int rank) {
  return "process/" + std::to_string(rank);
}

std::string this_host() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// Gone: no such process, or one that has ended and waits to be reaped (state Z).
bool process_is_gone(long pid) {
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t after_name = line.rfind(')');
  return after_name != std::string::npos && after_name + 2 < line.size() &&
         line[after_name + 2] == 'Z';
}

bool about_a_broken_connection(const std::string& message) {
  for (const char* sign : {"by peer", "Broken pipe", "Connection refused", "Socket closed",
                           "Read error", "Write error", "connection closed"}) {
    if (message.find(sign) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

void publish_rank_process(c10d::Store& store, int rank) {
  const std::string text = this_host() + " " + std::to_string(getpid());
  store.set(key_of(rank), std::vector<uint8_t>(text.begin(), text.end()));
}

std::string gone_peers_note(c10d::Store& store, int world, int self, const std::string& message) {
  if (!about_a_broken_connection(message)) return "";
  const std::string host = this_host();
  std::string note;
  for (int r = 0; r < world; ++r) {
    if (r == self) continue;
    try {
      if (!store.check({key_of(r)})) continue;
      const std::vector<uint8_t> bytes = store.get(key_of(r));
      std::istringstream in(std::string(bytes.begin(), bytes.end()));
      std::string their_host;
      long pid = 0;
      if (!(in >> their_host >> pid) || their_host != host || pid <= 0) continue;
      if (process_is_gone(pid))
        note += "; rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") has exited";
    } catch (const std::exception&) {
      return note;  // the store itself is gone (rank 0 hosted it): nothing more to learn
    }
  }
  return note;
}

}  // namespace shardscope
