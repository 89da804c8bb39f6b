#include "engine/launch/job_identity.h"

#include <cstdio>
#include <cstdlib>

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
                                         const JobIdentity& job, std::chrono::milliseconds timeout,
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
  return c10::make_intrusive<c10d::PrefixStore>(prefix, store);
}

}  // namespace shardscope
