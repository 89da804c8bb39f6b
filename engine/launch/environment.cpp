#include "engine/launch/environment.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "engine/train/config.h"

namespace shardscope {

namespace {

const char* set_value(const char* name) {
  const char* text = std::getenv(name);
  return text == nullptr || *text == '\0' ? nullptr : text;
}

// A whole number of digits only, at most `most`.
unsigned long long whole_from_env(const char* name, unsigned long long least,
                                  unsigned long long most, const char* what) {
  const std::string text = set_value(name);
  const std::string expected = std::string("expected ") + what + " from " + std::to_string(least) +
                               " to " + std::to_string(most) + ", got '" + text.substr(0, 40) + "'";
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) throw ConfigError(name, expected);
  }
  errno = 0;  // past 2^64 - 1, strtoull says so only here
  const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || value < least || value > most) throw ConfigError(name, expected);
  return value;
}

// A job's name travels in every store key and message: short, printable, no path.
void check_job_name(const char* name) {
  const char* text = set_value(name);
  if (text == nullptr) return;
  const std::string id = text;
  bool printable = true;
  for (char c : id) printable = printable && std::isgraph(static_cast<unsigned char>(c));
  if (id.size() > 128 || !printable) {
    throw ConfigError(name,
                      "a job's name is at most 128 printable characters without spaces (got " +
                          std::to_string(id.size()) + " characters)");
  }
}

// A byte count from `name`, between `least` and `most`; `fallback` when unset or empty. Digits
// only: strtoull took "-1" for 2^64 - 1, and a slot that large crashed the first collective.
size_t bytes_from_env(const char* name, size_t fallback, size_t least, size_t most) {
  if (set_value(name) == nullptr) return fallback;
  return static_cast<size_t>(whole_from_env(name, least, most, "a byte count"));
}

}  // namespace

constexpr size_t kMostShmBytes = size_t{1} << 30;

size_t shm_slot_bytes(size_t fallback, int world) {
  return bytes_from_env("SHARDSCOPE_SHM_SLOT_BYTES", fallback,
                        64 * (static_cast<size_t>(world) + 2), kMostShmBytes);
}

size_t shm_ring_bytes(size_t fallback) {
  return bytes_from_env("SHARDSCOPE_SHM_RING_BYTES", fallback, 32, kMostShmBytes);
}

void check_launch_environment(int world) {
  shm_slot_bytes(0, world);  // as make_process_group reads them
  shm_ring_bytes(0);
  if (set_value("SHARDSCOPE_SNAPSHOT_MS") != nullptr)
    whole_from_env("SHARDSCOPE_SNAPSHOT_MS", 0, 86400000, "milliseconds");
  if (set_value("TORCHELASTIC_RESTART_COUNT") != nullptr)
    whole_from_env("TORCHELASTIC_RESTART_COUNT", 0, 1000000, "a restart count");
  check_job_name("SHARDSCOPE_RUN_ID");
  check_job_name("TORCHELASTIC_RUN_ID");
  if (const char* worker = set_value("SHARDSCOPE_WORKER")) {
    struct stat st {};
    if (stat(worker, &st) != 0 || !S_ISREG(st.st_mode) || access(worker, X_OK) != 0) {
      throw ConfigError("SHARDSCOPE_WORKER", std::string("'") + worker +
                                                 "' is not an executable file (the binary rank "
                                                 "processes run; unset it to run this one)");
    }
  }
}

}  // namespace shardscope
