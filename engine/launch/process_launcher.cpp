#include "engine/launch/process_launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "engine/launch/compute_cores.h"
#include "engine/launch/launcher.h"
#include "engine/launch/rank_process.h"
#include "engine/launch/rank_result_file.h"
#include "engine/launch/stop_request.h"
#include "engine/launch/store_socket.h"
#include "engine/state/atomic_file.h"
#include "profiling/record/clock.h"

namespace shardscope {

// std::filesystem is avoided here: LibTorch exports its own copies of those symbols, and the
// dynamic linker may bind ours to them.
std::string worker_executable() {
  if (const char* exe = std::getenv("SHARDSCOPE_WORKER"); exe != nullptr && *exe != '\0')
    return exe;
  char path[4096];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0)
    throw std::runtime_error(std::string("cannot find this executable: ") + std::strerror(errno));
  return std::string(path, static_cast<size_t>(length));
}

namespace {

// How long ranks get to stop on their own once one has failed, before they are terminated.
constexpr auto kGracePeriod = std::chrono::seconds(5);
constexpr auto kTermToKill = std::chrono::seconds(2);
constexpr auto kPollInterval = std::chrono::milliseconds(20);

// The run directory holds only plain files.
void remove_run_directory(const std::string& path) {
  remove_directory_of_files(path);
}

constexpr char kRunDirectoryPrefix[] = "shardscope-run-";

constexpr char kRunLockFile[] = "/.lock";  // held (flock) by the launcher while it runs
constexpr char kKeptMarker[] = "/.kept";   // SHARDSCOPE_KEEP_RUN_DIR: never swept

// Run directories are named after their launcher's pid: shardscope-run-PID-XXXXXX. A launcher
// that was killed (SIGKILL, a second Ctrl-C) never removed its own, so each launch removes those
// whose launcher no longer exists. The pid is only a first filter (a launcher in another pid
// namespace sharing /tmp has a pid that means nothing here): a directory goes only if the lock
// its launcher held for the whole run can be taken, which the kernel releases when the launcher
// dies, whatever namespace it was in.
bool abandoned(const std::string& dir) {
  struct stat kept {};
  if (stat((dir + kKeptMarker).c_str(), &kept) == 0) return false;
  const int fd = open((dir + kRunLockFile).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;  // not locked yet (just made), or not ours
  const bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return free;
}

void remove_abandoned_run_directories() {
  DIR* tmp = opendir("/tmp");
  if (tmp == nullptr) return;
  std::vector<std::string> candidates;
  const size_t prefix = sizeof(kRunDirectoryPrefix) - 1;
  while (dirent* entry = readdir(tmp)) {
    const std::string name = entry->d_name;
    if (name.compare(0, prefix, kRunDirectoryPrefix) != 0) continue;
    const size_t dash = name.find('-', prefix);
    if (dash == std::string::npos || dash == prefix) continue;
    const std::string digits = name.substr(prefix, dash - prefix);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (kill(pid, 0) != 0 && errno == ESRCH) candidates.push_back("/tmp/" + name);
  }
  closedir(tmp);
  for (const auto& dir : candidates) {
    if (abandoned(dir)) remove_run_directory(dir);
  }
}

std::string describe_exit(int status) {
  if (WIFEXITED(status))
    return "rank process exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return std::string("rank process killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "rank process ended with wait status " + std::to_string(status);
}

// Everything the child needs is built before fork: between fork and exec only async-signal-safe
// calls are allowed in a multi-threaded parent.
struct ChildCommand {
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;
  void finish() {
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

pid_t spawn(ChildCommand& command, pid_t parent) {
  // A stop asked for while the rank process is still starting must wait for its handler, not
  // kill it: the signals stay blocked across exec until the worker installs the handler
  // (install_stop_signal_handlers unblocks them).
  const sigset_t stop_signals = stop_signal_set();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Dies with the launcher, however the launcher ends (no orphans). If the launcher is already
    // gone, the signal will never come: leave at once.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
    if (getppid() != parent) _exit(125);
    execve(command.argv[0], command.argv.data(), command.envp.data());
    _exit(127);
  }
  return pid;
}

// A new, empty run directory named after this launcher: shardscope-run-PID-XXXXXX.
std::string make_run_directory() {
  std::string dir_template =
      std::string("/tmp/") + kRunDirectoryPrefix + std::to_string(getpid()) + "-XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr)
    throw std::runtime_error(std::string("cannot create a run directory: ") + std::strerror(errno));
  return dir_template;
}

// Removes the run directory when the launch ends, however it ends (kept, and marked so, with
// SHARDSCOPE_KEEP_RUN_DIR), and releases its lock.
struct RemoveDir {
  std::string path;
  int lock = -1;
  ~RemoveDir() {
    if (std::getenv("SHARDSCOPE_KEEP_RUN_DIR") != nullptr) {
      try {
        write_file_atomically(path + kKeptMarker, "kept: SHARDSCOPE_KEEP_RUN_DIR was set\n");
      } catch (const std::exception&) {
        // Without the marker it is swept once this launcher is gone; nothing else is lost.
      }
    } else {
      remove_run_directory(path);
    }
    if (lock >= 0) close(lock);
  }
};

// Takes the lock that tells other launchers the directory is in use (see abandoned()).
void lock_run_directory(RemoveDir& remove_dir) {
  const std::string& dir = remove_dir.path;
  remove_dir.lock = open((dir + kRunLockFile).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (remove_dir.lock < 0 || flock(remove_dir.lock, LOCK_EX) != 0)
    throw std::runtime_error("cannot lock the run directory " + dir + ": " + std::strerror(errno));
}

// The store the ranks meet through, hosted by this launcher.
c10::intrusive_ptr<c10d::TCPStore> host_store(const Config& config) {
  c10d::TCPStoreOptions options;
  // Loopback only, on any free port: every rank is on this machine, and nothing else may join.
  options.masterListenFd = listen_on("127.0.0.1", 0);
  options.port = port_of(*options.masterListenFd);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(setup_timeout_s(config));
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

// This process's environment, less what says who a rank is and where the ranks meet: the
// launcher sets that for each rank.
std::vector<std::string> inherited_environment() {
  std::vector<std::string> inherited;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (key == "RANK" || key == "WORLD_SIZE" || key == "LOCAL_RANK" || key == "MASTER_ADDR" ||
        key == "MASTER_PORT" || key == "SHARDSCOPE_STORE_HOSTED" || key == "GLOO_SOCKET_IFNAME" ||
        key == "SHARDSCOPE_GLOO_ADDRESS" || key == "SHARDSCOPE_LAUNCHER_REPORTS" ||
        key == "TORCHELASTIC_USE_AGENT_STORE" || key == kComputeCoresVariable)
      continue;
    inherited.push_back(entry);
  }
  return inherited;
}

// One `shardscope worker` command per rank. (A command's argv and envp point into its own
// strings; moving the vector keeps every command where it is.)
std::vector<ChildCommand> worker_commands(const Config& config, const std::string& dir,
                                          int store_port) {
  const std::string exe = worker_executable();
  std::vector<std::string> inherited = inherited_environment();
  // Ranks that take turns on this CPU compute on cores this launcher claims, beside any other run.
  const LaunchSpec spec = launch_spec(config);
  const std::vector<int> cores = allowed_cores();
  if (spec.takes_turns_on_cpu() && config.world > 1 && spec.threads_per_rank >= 1 &&
      static_cast<int>(cores.size()) > spec.threads_per_rank) {
    inherited.push_back(std::string(kComputeCoresVariable) + "=" +
                        compute_cores_text(claim_compute_cores(cores, spec.threads_per_rank)));
  }
  std::vector<ChildCommand> commands(config.world);
  for (int r = 0; r < config.world; ++r) {
    ChildCommand& c = commands[r];
    c.args = {exe, "worker", "--config", dir + "/config.json", "--out", dir};
    c.env = inherited;
    c.env.push_back("RANK=" + std::to_string(r));
    c.env.push_back("LOCAL_RANK=" + std::to_string(r));
    c.env.push_back("WORLD_SIZE=" + std::to_string(config.world));
    c.env.push_back("MASTER_ADDR=127.0.0.1");
    c.env.push_back("MASTER_PORT=" + std::to_string(store_port));
    c.env.push_back("SHARDSCOPE_STORE_HOSTED=1");
    // Every rank is on this machine: Gloo stays on loopback whatever interfaces the user named.
    c.env.push_back("SHARDSCOPE_GLOO_ADDRESS=127.0.0.1");
    // This launcher shows rank 0's steps and every failure: the workers keep quiet.
    c.env.push_back("SHARDSCOPE_LAUNCHER_REPORTS=1");
    c.finish();
  }
  return commands;
}

// The rank processes from spawn to exit: reaps them, forwards rank 0's progress, and stops
// everyone once one has failed.
class RankWatch {
 public:
  RankWatch(const Config& config, const StepCallback& on_step, c10d::TCPStore& store)
      : config_(config),
        on_step_(on_step),
        store_(store),
        pids_(config.world, -1),
        statuses_(config.world, 0),
        exited_ns_(config.world, 0),
        running_(config.world, false) {}

  void spawn_all(std::vector<ChildCommand>& commands) {
    const pid_t self = getpid();
    for (int r = 0; r < config_.world; ++r) {
      pids_[r] = spawn(commands[r], self);
      running_[r] = true;
    }
  }

  // Returns once every rank process has been reaped.
  void watch() {
    while (std::any_of(running_.begin(), running_.end(), [](bool b) { return b; })) {
      reap();
      forward_progress();
      if (stop_requested() != 0 && !stop_forwarded_) {
        // Ctrl-C reaches the children too (one process group) and a scheduler's SIGTERM reaches
        // only the launcher: either way every rank is asked once, and they stop together.
        signal_running(SIGTERM);
        stop_forwarded_ = true;
      }
      const auto now = Clock::now();
      stop_a_lone_rank_that_stalled(now);
      if (first_failure_ && !terminated_ && now - *first_failure_ > kGracePeriod) {
        signal_running(SIGTERM);
        terminated_ = now;
      }
      if (terminated_ && now - *terminated_ > kTermToKill) signal_running(SIGKILL);
      std::this_thread::sleep_for(kPollInterval);
    }
    forward_progress();
  }

  std::vector<RankExit> exits() const {
    std::vector<RankExit> exits(config_.world);
    for (int r = 0; r < config_.world; ++r) exits[r] = {true, statuses_[r], exited_ns_[r], {}};
    if (!stalled_.empty()) exits[0].stalled = stalled_;
    return exits;
  }

 private:
  using Clock = std::chrono::steady_clock;

  void reap() {
    for (int r = 0; r < config_.world; ++r) {
      if (!running_[r]) continue;
      int status = 0;
      if (waitpid(pids_[r], &status, WNOHANG) != pids_[r]) continue;
      running_[r] = false;
      statuses_[r] = status;
      exited_ns_[r] = profiling::now_ns();
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !first_failure_)
        first_failure_ = Clock::now();
    }
  }

  void forward_progress() {
    while (next_step_ < config_.steps && store_.check({progress_key(next_step_)})) {
      auto bytes = store_.get(progress_key(next_step_));
      const StepRecord s =
          step_record_of(nlohmann::json::parse(std::string(bytes.begin(), bytes.end())));
      if (on_step_) on_step_(s);
      ++next_step_;
      last_progress_ = Clock::now();
      slowest_step_s_ = std::max(slowest_step_s_, s.step_time_s);
    }
  }

  // Ranks find a hung peer by their collectives' timeout; a rank alone has no peer to find it,
  // and a hang of its own held the launcher forever. Once it has stepped, the launcher applies
  // the peers' rule to its steps: the timeout given, or max(5 s, 10 x the slowest step), given
  // ten minutes while a step may be writing a checkpoint.
  void stop_a_lone_rank_that_stalled(Clock::time_point now) {
    if (config_.world != 1 || !running_[0] || first_failure_ || stop_forwarded_ || next_step_ < 1 ||
        next_step_ >= config_.steps)
      return;
    double limit_s = config_.collective_timeout_s > 0 ? config_.collective_timeout_s
                                                      : std::max(5.0, 10.0 * slowest_step_s_);
    if (config_.collective_timeout_s <= 0 && config_.checkpoint_every > 0)
      limit_s = std::max(limit_s, 600.0);
    const double quiet_s = std::chrono::duration<double>(now - last_progress_).count();
    if (quiet_s <= limit_s) return;
    char why[200];
    std::snprintf(why, sizeof why,
                  "it made no progress for %.0f s after step %d (the limit: %.0f s), so the "
                  "launcher stopped it",
                  quiet_s, next_step_ - 1, limit_s);
    stalled_ = why;
    first_failure_ = terminated_ = now;  // no peer to wait for: asked to stop now, then killed
    signal_running(SIGTERM);
  }

  void signal_running(int sig) {
    for (int r = 0; r < config_.world; ++r) {
      if (running_[r]) kill(pids_[r], sig);
    }
  }

  const Config& config_;
  const StepCallback& on_step_;
  c10d::TCPStore& store_;
  std::vector<pid_t> pids_;
  std::vector<int> statuses_;
  std::vector<int64_t> exited_ns_;
  std::vector<bool> running_;
  std::optional<Clock::time_point> first_failure_, terminated_;
  int next_step_ = 0;
  Clock::time_point last_progress_ = Clock::now();
  double slowest_step_s_ = 0;
  std::string stalled_;
  bool stop_forwarded_ = false;
};

}  // namespace

ProcessLaunchOutcome launch_rank_processes(const Config& config, const StepCallback& on_step) {
  remove_abandoned_run_directories();
  const std::string dir = make_run_directory();
  RemoveDir remove_dir{dir};
  lock_run_directory(remove_dir);
  Config child_config = config;
  child_config.reference = false;
  write_file_atomically(dir + "/config.json", to_json(child_config).dump(2));

  auto store = host_store(config);
  std::vector<ChildCommand> commands = worker_commands(config, dir, store->getPort());
  RankWatch ranks(config, on_step, *store);
  ranks.spawn_all(commands);
  ranks.watch();
  return read_rank_outcomes(dir, config.world, ranks.exits());
}

ProcessLaunchOutcome read_rank_outcomes(const std::string& dir, int world,
                                        const std::vector<RankExit>& exits) {
  ProcessLaunchOutcome outcome;
  outcome.results.resize(world);
  outcome.launch.peak_allocated_bytes.assign(world, 0);
  std::vector<bool> vanished(world, false);
  for (int r = 0; r < world; ++r) {
    outcome.launch.logs.push_back(std::make_unique<profiling::RankEventLog>(r));
    RankOutcome rank;
    const bool read = read_rank_outcome(dir, r, rank, *outcome.launch.logs[r]);
    outcome.launch.peak_allocated_bytes[r] = rank.peak_allocated_bytes;
    for (auto& activity : rank.device_activity) {
      activity.rank = r;  // the process is the rank, whatever thread launched the kernel
      outcome.device_activity.push_back(std::move(activity));
    }
    const RankExit ended = exits.empty() ? RankExit{} : exits[r];
    const bool exited_cleanly =
        !ended.seen || (WIFEXITED(ended.wait_status) && WEXITSTATUS(ended.wait_status) == 0);
    const bool killed = ended.seen && WIFSIGNALED(ended.wait_status);
    const bool partial = read && !rank.partial.empty();
    if (read && !partial && rank.failure && !killed) {
      outcome.launch.failures.push_back(*rank.failure);
    } else if (!read || partial || !exited_cleanly || !rank.result) {
      // A crash, a kill, or termination after another's failure: its partial record, if any,
      // is kept, and the message says how far it goes.
      std::string why = ended.seen
                            ? describe_exit(ended.wait_status)
                            : "rank process left " +
                                  (read ? std::string("an unfinished ") : std::string("no ")) +
                                  dir + "/rank-" + std::to_string(r) + ".json";
      if (rank.partial == kPartialAskedToStop) {
        why +=
            "; it did not stop at a step boundary when the launcher asked; its record up to "
            "then is kept";
      } else if (partial) {
        why += "; its record up to its last snapshot (taken every second or so) is kept";
      } else if (read && rank.failure) {
        why += "; it " + rank.failure->message;
      }
      if (!ended.stalled.empty()) why += "; " + ended.stalled;
      outcome.launch.failures.push_back({r, why, ended.t_ns});
      vanished[r] = true;
    }
    if (rank.result) outcome.results[r] = std::move(*rank.result);
  }
  // A rank that vanished without a word (killed, crashed, exited) caused what the others then
  // reported about their closed connections: it goes first, then in time order.
  std::sort(outcome.launch.failures.begin(), outcome.launch.failures.end(),
            [&](const RankFailure& a, const RankFailure& b) {
              if (vanished[a.rank] != vanished[b.rank]) return bool(vanished[a.rank]);
              return a.t_ns < b.t_ns;
            });
  return outcome;
}

}  // namespace shardscope
