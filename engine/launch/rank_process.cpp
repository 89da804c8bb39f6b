#include "engine/launch/rank_process.h"

#include "engine/launch/peer_liveness.h"
#include "engine/launch/process_group_factory.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>
#include <utility>

#include <c10/util/Logging.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "engine/launch/device_turns.h"
#include "engine/launch/job_identity.h"
#include "engine/launch/rank_result_file.h"
#include "engine/launch/rank_runner.h"
#include "engine/launch/stop_request.h"
#include "engine/launch/store_socket.h"
#include "engine/model/token_data.h"
#include "engine/train/strategy_registry.h"
#include "profiling/record/clock.h"

namespace shardscope {
namespace {

int int_from_env(const char* name, bool required, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    if (required) throw ConfigError(name, "environment variable not set");
    return fallback;
  }
  try {
    // Digits only: stoi would also take "+1", " 1" or "1e3"'s "1".
    const std::string digits = text;
    size_t used = 0;
    const int value = std::stoi(digits, &used);
    if (used == digits.size() && std::isdigit(static_cast<unsigned char>(digits[0])) && value >= 0)
      return value;
  } catch (const std::exception&) {
  }
  throw ConfigError(name, "expected a non-negative integer, got '" + std::string(text) + "'");
}

// The launch spec of this process's rank. With several ranks taking turns on one device, it
// also opens the lock file through which they do.
LaunchSpec rank_launch_spec(const Config& config, const RankEnvironment& env,
                            const std::string& out_dir) {
  LaunchSpec spec = launch_spec(config);
  spec.gloo_network = env.gloo_network;
  // One GPU per process with NCCL: the one of its local rank on its node.
  if (config.backend == "nccl") spec.device = "cuda:" + std::to_string(env.local_rank);
  // Shared memory joins the ranks of one host. Ranks that reach their master over the network
  // (torchrun across hosts) may not share one: they keep Gloo, which crosses hosts.
  const bool over_network =
      !env.gloo_network.interfaces.empty() || env.gloo_network.address.rfind("127.", 0) != 0;
  if (spec.backend == "shm" && over_network) spec.backend = "gloo";
  // The ranks of one host share its device and its output folder: their turns on the device are
  // taken through a lock file there.
  if (spec.take_turns && config.world > 1)
    DeviceTurns::instance().share_across_processes(out_dir + "/.device.turns", env.rank);
  return spec;
}

// What a worker that never joined its job says of the rank file it leaves alone (see
// write_rank_outcome_unless_present): nothing when it joined or there is none.
std::string kept_note(bool joined, const std::string& out_dir, int rank) {
  std::error_code ec;
  const std::string path = rank_outcome_path(out_dir, rank);
  if (joined || !std::filesystem::exists(path, ec)) return "";
  return " (" + path + " left as it was: this process never joined the job as rank " +
         std::to_string(rank) + ")";
}

// A keeper thread puts what this rank has recorded on disk while it trains, so that a rank
// that dies (a crash, an exit) or hangs still leaves its trace up to then:
//  - every so often, a snapshot: at first after half a second, then at intervals of at least
//    a second and twenty times what the last snapshot took, so it costs at most about 5 % of
//    a core however large the record grows;
//  - at once when the launcher asks this rank to stop (SIGTERM): a rank stuck in a collective
//    never reaches the step boundary where it would stop, and SIGKILL follows two seconds
//    later.
// A rank that finishes or stops overwrites them with its whole outcome.
// SHARDSCOPE_SNAPSHOT_MS shortens both the first delay and the least interval (for tests).
//
// It also ends a rank that cannot end itself: one blocked in a connect or a store wait that
// only gives up long after its timeout (a peer on another host that never answers), or that
// does not heed a SIGTERM because it has not met the other ranks and so never reaches a step
// boundary. A worker started by a scheduler must end within its own timeout: the keeper
// records why, says so on stderr and ends the process.
struct Keeper {
  using Clock = std::chrono::steady_clock;

  Keeper(const Config& config, const RankEnvironment& env, const std::string& out_dir,
         const RankProcessReports& reports, const profiling::RankEventLog& log,
         std::chrono::milliseconds first, std::chrono::milliseconds least,
         std::chrono::seconds timeout, std::string master)
      : config(config),
        env(env),
        out_dir(out_dir),
        reports(reports),
        log(log),
        first(first),
        least(least),
        timeout(timeout),
        master(std::move(master)) {}

  const Config& config;
  const RankEnvironment& env;
  const std::string& out_dir;
  const RankProcessReports& reports;
  const profiling::RankEventLog& log;
  const std::chrono::milliseconds first;  // before the first snapshot
  const std::chrono::milliseconds least;  // between snapshots
  const std::chrono::seconds timeout;     // the setup timeout
  const std::string master;               // MASTER_ADDR:MASTER_PORT
  std::atomic<bool> finished{false};
  std::atomic<bool> joined{false};  // the job took this process as its rank
  std::atomic<bool> met{false};     // every rank connected: training has begun

  void write_partial(const std::string& why, const std::string& failure = "") const {
    RankOutcome partial;
    partial.partial = why;
    if (!failure.empty()) partial.failure = RankFailure{env.rank, failure, profiling::now_ns()};
    try {
      if (joined.load())
        write_rank_outcome(out_dir, env.rank, partial, log);
      else
        write_rank_outcome_unless_present(out_dir, env.rank, partial, log);
    } catch (const std::exception&) {
      // Best effort: the rank's own outcome, if it gets that far, is what counts.
    }
  }

  [[noreturn]] void give_up(const std::string& reason) const {
    const std::string why = reason + kept_note(joined.load(), out_dir, env.rank);
    write_partial(kPartialAskedToStop, why);
    if (reports.failed) reports.failed(RankFailure{env.rank, why, profiling::now_ns()});
    std::fflush(stderr);
    std::_Exit(1);
  }

  // The thread's body: runs until `finished`, or ends the process.
  void run() const {
    const std::string where = master + ", Gloo on " + env.gloo_network.describe();
    // Meeting has its own deadline, a little past the timeout the connects themselves use, so
    // that their own, more precise error wins when they do give up in time.
    const auto meet_by = Clock::now() + timeout + std::chrono::seconds(2);
    auto next_snapshot = Clock::now() + first;
    std::optional<Clock::time_point> asked_at;
    while (!finished.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (finished.load()) break;
      const auto now = Clock::now();
      if (!met.load() && now > meet_by) {
        give_up("could not meet the other ranks within the " +
                std::to_string(setup_timeout_s(config)) + " s timeout (" + where + ")");
      }
      if (!asked_at && stop_requested() != 0) {
        asked_at = now;
        write_partial(kPartialAskedToStop);
      }
      if (asked_at) {
        // Before meeting there is no step boundary to stop at; after, a step ends within the
        // collective timeout, or the collective fails.
        if (!met.load() && now > *asked_at + std::chrono::seconds(1))
          give_up("stopped by a signal while waiting for the other ranks (" + where + ")");
        if (now > *asked_at + timeout + std::chrono::seconds(5))
          give_up("did not reach a step boundary within the timeout after a stop request");
        continue;
      }
      // Snapshots only once this rank is one of the job's (before, it has recorded nothing, and a
      // rank refused by the job must not write over the files of the rank it claimed to be).
      if (!met.load() || now < next_snapshot) continue;
      write_partial(kPartialSnapshot);
      next_snapshot = Clock::now() + std::max<Clock::duration>(least, 20 * (Clock::now() - now));
    }
  }
};

// While a client waits for the store to listen, LibTorch logs each retry, and its giving up, with
// its exception's whole stack (a dozen "frame #" lines each); this rank's own line says why it
// gave up (the keeper's, or the constructor's error without its stack). So LibTorch's log is kept
// quiet for that wait, unless the user chose a level (TORCH_CPP_LOG_LEVEL).
struct QuietStoreRetries {
  static constexpr int kFatalOnly = 3;  // c10's levels: 0 info, 1 warning, 2 error, 3 fatal
  const int was = FLAGS_caffe2_log_level;
  QuietStoreRetries() {
    if (std::getenv("TORCH_CPP_LOG_LEVEL") == nullptr)
      FLAGS_caffe2_log_level = std::max(was, kFatalOnly);
  }
  ~QuietStoreRetries() { FLAGS_caffe2_log_level = was; }
  QuietStoreRetries(const QuietStoreRetries&) = delete;
  QuietStoreRetries& operator=(const QuietStoreRetries&) = delete;
};

// Connects to the job's TCPStore (rank 0 hosts it unless its launcher does). Returns null, with
// the reason in `outcome.failure`, when it cannot.
c10::intrusive_ptr<c10d::TCPStore> connect_to_store(const Config& config,
                                                    const RankEnvironment& env,
                                                    std::chrono::seconds timeout,
                                                    const std::string& master,
                                                    RankOutcome& outcome) {
  // Connecting to the store waits for rank 0 to listen: under the keeper's deadline, too.
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = env.rank == 0 && !env.store_hosted_elsewhere;
  options.numWorkers = config.world;
  options.waitWorkers = false;
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::TCPStore> store;
  if (options.isServer) {
    // Rank 0 listens on MASTER_ADDR alone, not on every interface of its host. A port another
    // process holds (or an address not this host's) is the launch's bad input, not a failure of
    // the job.
    try {
      options.masterListenFd = listen_on(env.master_addr, options.port);
    } catch (const ListenError& e) {
      if (e.address)
        throw ConfigError("MASTER_ADDR", std::string(e.what()) +
                                             " (rank 0 listens on MASTER_ADDR: "
                                             "an address of this host)");
      throw ConfigError("MASTER_PORT", std::string(e.what()) + " (choose a free MASTER_PORT)");
    }
  }
  try {
    QuietStoreRetries quiet;
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::runtime_error& e) {
    outcome.failure = RankFailure{env.rank, e.what(), profiling::now_ns()};
  } catch (const c10::Error& e) {
    // One line, not LibTorch's stack dump, and into the rank's outcome like any failure.
    outcome.failure = RankFailure{env.rank,
                                  std::string(options.isServer ? "cannot host" : "cannot reach") +
                                      " the store at " + master + ": " + e.what_without_backtrace(),
                                  profiling::now_ns()};
  }
  return store;
}

// Only ranks of this job, each once, meet under its keys. Returns null, with the reason in
// `outcome.failure`, when this rank cannot join; throws ConfigError when it is not the job's.
c10::intrusive_ptr<c10d::Store> join_job_store(const Config& config, const RankEnvironment& env,
                                               const c10::intrusive_ptr<c10d::TCPStore>& store,
                                               std::chrono::seconds timeout,
                                               const std::string& master, RankOutcome& outcome) {
  c10::intrusive_ptr<c10d::Store> job_store;
  if (store) {
    try {
      job_store = join_job(store, env.rank, env.world, job_identity(config), timeout, master);
    } catch (const ConfigError&) {
      throw;  // another job's rank, or a second of ours: bad input, not a failure of this job
    } catch (const std::exception& e) {
      outcome.failure = RankFailure{env.rank, e.what(), profiling::now_ns()};
    }
  }
  return job_store;
}

}  // namespace

std::string progress_key(int record) {
  return "shardscope/progress/" + std::to_string(record);
}

RankEnvironment rank_environment_from_env() {
  RankEnvironment env;
  env.rank = int_from_env("RANK", true, 0);
  env.world = int_from_env("WORLD_SIZE", true, 1);
  env.local_rank = int_from_env("LOCAL_RANK", false, env.rank);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0')
    env.master_addr = addr;
  env.master_port = int_from_env("MASTER_PORT", false, 29500);
  if (env.master_port == 0 || env.master_port > 65535)
    throw ConfigError("MASTER_PORT", "not a port: " + std::to_string(env.master_port));
  if (env.rank >= env.world) {
    throw ConfigError("RANK", "rank " + std::to_string(env.rank) + " is not below WORLD_SIZE " +
                                  std::to_string(env.world));
  }
  // torchrun's agent sets TORCHELASTIC_USE_AGENT_STORE to Python's str(True) when it hosts the
  // store at MASTER_ADDR:MASTER_PORT; then every rank is a client, as in PyTorch's own
  // torch/distributed/rendezvous.py (_create_c10d_store).
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  env.store_hosted_elsewhere = std::getenv("SHARDSCOPE_STORE_HOSTED") != nullptr ||
                               (agent_store != nullptr && std::string(agent_store) == "True");
  env.launcher_reports = std::getenv("SHARDSCOPE_LAUNCHER_REPORTS") != nullptr;
  env.gloo_network = gloo_network_from_env(env.master_addr);
  return env;
}

int run_rank_process(const Config& config, const RankEnvironment& env, const std::string& out_dir,
                     const RankProcessReports& reports) {
  prepare_process_for_groups();  // before the keeper's thread or the rank's start
  if (env.world != config.world) {
    throw ConfigError("WORLD_SIZE", std::to_string(env.world) +
                                        " processes, but the config's world is " +
                                        std::to_string(config.world) +
                                        " (leave \"world\" out of the config to take WORLD_SIZE)");
  }
  const StrategyInfo* info = StrategyRegistry::instance().find(config.strategy);
  auto corpus = TokenCorpus::load(config.data, config.model.vocab, config.seed);
  auto sampler = std::make_shared<const BatchSampler>(corpus, config.model.seq, config.micro_batch,
                                                      config.world, config.grad_accum, config.seed);
  LaunchSpec spec = rank_launch_spec(config, env, out_dir);

  profiling::RankEventLog log(env.rank);
  // The keeper (see Keeper) puts this rank's record on disk while it trains and ends a rank that
  // cannot end itself.
  const int snapshot_ms = int_from_env("SHARDSCOPE_SNAPSHOT_MS", false, 0);
  const auto first = std::chrono::milliseconds(snapshot_ms > 0 ? snapshot_ms : 500);
  const auto least = std::chrono::milliseconds(snapshot_ms > 0 ? snapshot_ms : 1000);
  const auto timeout = std::chrono::seconds(setup_timeout_s(config));
  const std::string master = env.master_addr + ":" + std::to_string(env.master_port);
  Keeper keeping(config, env, out_dir, reports, log, first, least, timeout, master);
  std::thread keeper([&] { keeping.run(); });
  struct JoinOnExit {
    std::atomic<bool>& finished;
    std::thread& keeper;
    ~JoinOnExit() {
      finished = true;
      if (keeper.joinable()) keeper.join();
    }
  } join_on_exit{keeping.finished, keeper};
  RankOutcome outcome;
  // CUPTI sees only its own process: each rank process traces its kernels and sends them back.
  profiling::DeviceTracer& device_tracer = profiling::DeviceTracer::instance();
  std::string no_tracing;
  const bool tracing_device = config.device != "cpu" && config.tracing && config.device_tracing &&
                              device_tracer.enable(&no_tracing);
  const c10::intrusive_ptr<c10d::TCPStore> store =
      connect_to_store(config, env, timeout, master, outcome);
  const c10::intrusive_ptr<c10d::Store> job_store =
      join_job_store(config, env, store, timeout, master, outcome);
  if (job_store) {
    keeping.joined = true;
    publish_rank_process(*job_store, env.rank);
    if (reports.joined) reports.joined();
  }
  if (job_store)
    outcome.failure = run_rank(
        spec, env.rank, job_store, &log, outcome.peak_allocated_bytes, [&](RankContext& ctx) {
          keeping.met = true;
          ctx.config = &config;
          ctx.sampler = sampler;
          auto strategy = info->make();
          int reported = 0;  // a resumed run's first record is not step 0
          outcome.result = train_rank(ctx, *strategy, [&](const StepRecord& s) {
            const std::string text = step_record_json(s).dump();
            store->set(progress_key(reported++), std::vector<uint8_t>(text.begin(), text.end()));
            if (reports.on_step) reports.on_step(s);
          });
        });
  if (outcome.failure) outcome.result.reset();
  if (outcome.failure && job_store) {
    const std::string gone =
        gone_peers_note(*job_store, env.world, env.rank, outcome.failure->message);
    if (!gone.empty()) outcome.failure->message = gone.substr(2) + ": " + outcome.failure->message;
  }
  if (outcome.failure)
    outcome.failure->message += kept_note(job_store != nullptr, out_dir, env.rank);
  if (outcome.failure && reports.failed) reports.failed(*outcome.failure);
  keeping.finished = true;
  keeper.join();  // before the final write, which shares its temporary file name
  if (tracing_device) {
    try {
      outcome.device_activity = device_tracer.collect();
    } catch (const std::exception&) {
      // A device that failed the run fails the flush too: the rank's outcome still goes back.
    }
  }
  if (job_store)
    write_rank_outcome(out_dir, env.rank, outcome, log);
  else
    write_rank_outcome_unless_present(out_dir, env.rank, outcome, log);
  return outcome.failure ? 1 : 0;
}

}  // namespace shardscope
