#include "engine/launch/job_identity.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "engine/state/hashing.h"

namespace shardscope {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string text_of(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

// Rank 0 waits until every rank has joined with its config. A rank with another config leaves a
// "stranger" key and exits: rank 0 then names it, after a short grace in which the right rank
// may still come (a stranger can be another job's rank on this port), instead of waiting out the
// whole timeout on its peers' keys.
void wait_for_every_rank(const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix,
                         int world, const JobIdentity& job, std::chrono::milliseconds timeout,
                         const std::string& where) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto grace = std::min(timeout, std::chrono::milliseconds(10000));
  std::vector<Clock::time_point> stranger_seen(world, Clock::time_point::max());
  std::vector<std::string> every_rank;
  for (int r = 1; r < world; ++r) every_rank.push_back(prefix + "rank/" + std::to_string(r));
  for (;;) {
    // Polled: a Store::wait with a short timeout logs a warning each time it runs out.
    if (store->check(every_rank)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<int> missing;
    for (int r = 1; r < world; ++r) {
      if (store->check({prefix + "rank/" + std::to_string(r)})) continue;
      missing.push_back(r);
      if (stranger_seen[r] == Clock::time_point::max() &&
          store->check({prefix + "stranger/" + std::to_string(r)}))
        stranger_seen[r] = Clock::now();
      if (stranger_seen[r] != Clock::time_point::max() && Clock::now() - stranger_seen[r] > grace) {
        const std::string theirs = text_of(store->get(prefix + "stranger/" + std::to_string(r)));
        throw ConfigError("config", "rank " + std::to_string(r) + " came to " + where +
                                        " with another config (hash " + theirs + ", rank 0's " +
                                        job.config_hash + "): give every rank the same config");
      }
    }
    if (missing.empty()) return;
    if (Clock::now() - start > timeout) {
      std::string ranks;
      for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      throw std::runtime_error("rank" + std::string(missing.size() > 1 ? "s " : " ") + ranks +
                               " of job '" + job.id + "' never joined at " + where + " within " +
                               std::to_string(timeout.count() / 1000) + " s");
    }
  }
}

}  // namespace

JobIdentity job_identity(const Config& config) {
  JobIdentity job;
  job.id = env_or("TORCHELASTIC_RUN_ID", env_or("SHARDSCOPE_RUN_ID", "default"));
  // torchrun restarts its workers on the same agent store: each attempt is a job of its own.
  if (const std::string restart = env_or("TORCHELASTIC_RESTART_COUNT", ""); !restart.empty())
    job.id += "/attempt-" + restart;
  const std::string text = to_json(config).dump();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(fnv1a(text.data(), text.size())));
  job.config_hash = hex;
  return job;
}

c10::intrusive_ptr<c10d::Store> join_job(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                         int world, const JobIdentity& job,
                                         std::chrono::milliseconds timeout,
                                         const std::string& where) {
  const std::string prefix = "shardscope/job/" + job.id + "/";
  const std::string announced = prefix + "config";
  if (rank == 0) {
    store->set(announced, std::vector<uint8_t>(job.config_hash.begin(), job.config_hash.end()));
  } else {
    try {
      store->wait({announced}, timeout);
    } catch (const c10::Error&) {
      throw std::runtime_error("rank 0 of job '" + job.id + "' never announced itself at " + where +
                               " within " + std::to_string(timeout.count() / 1000) + " s");
    }
    const std::string theirs = text_of(store->get(announced));
    if (theirs != job.config_hash) {
      // Said where rank 0 looks, so that it stops at once instead of waiting out its timeout.
      store->set(prefix + "stranger/" + std::to_string(rank),
                 std::vector<uint8_t>(job.config_hash.begin(), job.config_hash.end()));
      throw ConfigError("config", "rank 0 at " + where + " runs another config (hash " + theirs +
                                      ", this rank's " + job.config_hash +
                                      "): another job holds this port, or the ranks were given "
                                      "different configs");
    }
  }
  if (store->add(prefix + "rank/" + std::to_string(rank), 1) > 1) {
    throw ConfigError("RANK", "a rank " + std::to_string(rank) + " has already joined job '" +
                                  job.id + "' at " + where +
                                  " (a second set of workers on this port? give each job its "
                                  "own MASTER_PORT or SHARDSCOPE_RUN_ID)");
  }
  if (rank == 0) wait_for_every_rank(store, prefix, world, job, timeout, where);
  return c10::make_intrusive<c10d::PrefixStore>(prefix, store);
}

}  // namespace shardscope
