#include "engine/rank_process.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "engine/rank_result_file.h"
#include "engine/rank_runner.h"
#include "engine/stop_request.h"
#include "engine/strategy_registry.h"
#include "engine/token_data.h"
#include "profiling/clock.h"

namespace shardscope {
namespace {

int int_from_env(const char* name, bool required, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    if (required) throw ConfigError(name, "environment variable not set");
    return fallback;
  }
  try {
    size_t used = 0;
    const int value = std::stoi(text, &used);
    if (used == std::string(text).size() && value >= 0) return value;
  } catch (const std::exception&) {
  }
  throw ConfigError(name, "expected a non-negative integer, got '" + std::string(text) + "'");
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
  env.store_hosted_elsewhere = std::getenv("SHARDSCOPE_STORE_HOSTED") != nullptr;
  return env;
}

int run_rank_process(const Config& config, const RankEnvironment& env, const std::string& out_dir) {
  if (env.world != config.world) {
    throw ConfigError("WORLD_SIZE", std::to_string(env.world) + " processes for a run of world " +
                                        std::to_string(config.world));
  }
  const StrategyInfo* info = StrategyRegistry::instance().find(config.strategy);
  auto corpus = TokenCorpus::load(config.data, config.model.vocab, config.seed);
  auto sampler = std::make_shared<const BatchSampler>(corpus, config.model.seq, config.micro_batch,
                                                      config.world, config.grad_accum, config.seed);
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = env.rank == 0 && !env.store_hosted_elsewhere;
  options.numWorkers = config.world;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(config.collective_timeout_s);
  auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);

  LaunchSpec spec = launch_spec(config);
  // One GPU per process with NCCL: the one of its local rank on its node.
  if (config.backend == "nccl") spec.device = "cuda:" + std::to_string(env.local_rank);

  profiling::RankEventLog log(env.rank);
  // When the launcher asks this rank to stop (SIGTERM), what it recorded so far goes to disk at
  // once: a rank stuck in a collective or hung never reaches the step boundary where it would
  // stop, and SIGKILL follows two seconds later. A rank that does stop overwrites it with its
  // whole outcome.
  std::atomic<bool> finished{false};
  std::thread keeper([&] {
    while (!finished.load() && stop_requested() == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (finished.load()) return;
    RankOutcome partial;
    partial.failure = RankFailure{env.rank,
                                  "did not stop at a step boundary when the launcher asked; "
                                  "its record up to then is kept",
                                  profiling::now_ns()};
    try {
      write_rank_outcome(out_dir, env.rank, partial, log);
    } catch (const std::exception&) {
      // Best effort: the rank's own outcome, if it gets that far, is what counts.
    }
  });
  struct JoinOnExit {
    std::atomic<bool>& finished;
    std::thread& keeper;
    ~JoinOnExit() {
      finished = true;
      if (keeper.joinable()) keeper.join();
    }
  } join_on_exit{finished, keeper};
  RankOutcome outcome;
  outcome.failure =
      run_rank(spec, env.rank, store, &log, outcome.peak_allocated_bytes, [&](RankContext& ctx) {
        ctx.config = &config;
        ctx.sampler = sampler;
        auto strategy = info->make();
        int reported = 0;  // a resumed run's first record is not step 0
        outcome.result = train_rank(ctx, *strategy, [&](const StepRecord& s) {
          const std::string text = step_record_json(s).dump();
          store->set(progress_key(reported++), std::vector<uint8_t>(text.begin(), text.end()));
        });
      });
  if (outcome.failure) outcome.result.reset();
  finished = true;
  keeper.join();  // before the final write, which shares its temporary file name
  write_rank_outcome(out_dir, env.rank, outcome, log);
  return outcome.failure ? 1 : 0;
}

}  // namespace shardscope
