#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/train/option_support.h"

namespace shardscope {

class Strategy;
struct Config;

// What the rest of the program asks of a strategy, instead of comparing its name: the GUI's
// memory formula and teaching text, Compare's baseline, bench's list. It lives with the
// strategy, in its registration.
// How a strategy divides the work, which decides what the rest of the program asks it next (its
// layout's degrees, its expert or context degree).
enum class StrategyFamily {
  kReference,        // one device: what every strategy must match
  kDataParallel,     // every rank its own micro-batches (DDP, ZeRO, FSDP)
  kModelParallel,    // a layout of tensor, pipeline and data degrees (tp, pp, hybrid)
  kContextParallel,  // sequences split over ranks that each hold every weight
  kExpertParallel,   // experts split over ranks, tokens travelling to them by all_to_all
};

// The family as people say it ("data parallel"), for text and tables.
const char* family_name(StrategyFamily family);

// How a data-parallel strategy's gradients travel, for a projection of a run that never happens
// (app/analysis/configuration_projection.cpp): while backward still runs or after it, in buckets
// of bucket_mb or one collective per parameter, and what brings every rank the updated
// parameters once the optimizer has stepped. (ZeRO-3 gathers unit by unit: its zero_stage says.)
struct GradientSync {
  // Buckets reduced as they fill during backward; with the strategy's `overlap` option on, where
  // it offers one.
  bool overlaps_backward = false;
  bool per_parameter = false;  // one collective per parameter tensor, not buckets
  // The first bucket at most 1 MiB under the default cap (DDP's Reducer), to start sooner.
  bool small_first_bucket = false;
  // Backward waits, as it issues one, until no more than this many are unfinished (0: any).
  int max_in_flight = 0;
  enum class AfterStep {
    kNothing,              // every rank stepped every parameter
    kBroadcastFromOwners,  // each rank broadcasts the parameters it stepped (ZeRO-1 here)
    kAllGather,            // the stepped shards all-gathered, bucket by bucket (ZeRO-2 here)
  };
  AfterStep after_step = AfterStep::kNothing;
};

struct StrategyTraits {
  StrategyFamily family = StrategyFamily::kDataParallel;
  // What data parallelism shards, as the ZeRO paper counts: 0 nothing, 1 optimizer state, 2 and
  // gradients, 3 and parameters.
  int zero_stage = 0;
  // The model-parallel dimension that takes the whole world when its degree is not given:
  // "tensor", "pipeline", or empty (the degrees come from the options, or there are none).
  std::string world_dimension;
  // PyTorch's own engine: what Compare measures the others against.
  bool baseline = false;
  // Whether it can sync the data-parallel dimension of a tensor- or pipeline-parallel run
  // (strategy_options.data_parallel_sync, --dp-sync).
  bool data_parallel_sync = false;
  // What the strategy shows a student, in a sentence or three (the Launch and Timeline tabs).
  std::string teaching;
  // Which ranks of a run do identical work under spans of one name (equal values), so that
  // device time gives the same work the same time (profiling/projection/steady_device.h).
  // Unset: by family (work_classes).
  std::function<int(const Config& config, int rank)> work_class;
  // The strategy options it reads: the Launch form shows only these, and its validation starts
  // from them (refining what depends on the configuration, such as offload under a dp sync).
  OptionSupport options;
  GradientSync gradient_sync;
  // A composition (zero1 over torch_ddp): the strategy it is built on. strategy_traits() then
  // gives the base's options joined with `options`, which hold only the additions, and the
  // base's gradient sync with the composition's own `after_step`.
  std::string options_base;
};

// What the engine knows of a strategy without building one: kept free of LibTorch so that
// configuration code can validate names cheaply.
struct StrategyInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Strategy>()> make;
  // Throws ConfigError for configurations this strategy cannot run (optional).
  std::function<void(const Config&)> validate;
  StrategyTraits traits;
};

// The traits of the strategy a run or trace names; defaults for a name no registration knows
// (a trace of another tool, or of a strategy since renamed).
StrategyTraits strategy_traits(const std::string& name);

// Per rank of `config`'s run, its work class (StrategyTraits::work_class): the strategy's own
// rule, else one class for every rank of a data-parallel run (each its own micro-batches of the
// same model) and a class of its own for every rank of any other (an expert rank's tokens, a
// context rank's chunks of a causal sequence).
std::vector<int> work_classes(const Config& config);

class StrategyRegistry {
 public:
  static StrategyRegistry& instance();

  void add(StrategyInfo info);
  const StrategyInfo* find(const std::string& name) const;
  std::vector<std::string> names() const;
  // The names, sorted, of the strategies whose traits `keep` accepts.
  std::vector<std::string> names_where(
      const std::function<bool(const StrategyTraits&)>& keep) const;
  // The strategy of family "reference": the one device every strategy must train like.
  std::string reference() const;

 private:
  std::vector<StrategyInfo> entries_;
};

// Registers a strategy from a static initialiser in its own file.
struct StrategyRegistrar {
  explicit StrategyRegistrar(StrategyInfo info) {
    StrategyRegistry::instance().add(std::move(info));
  }
};

}  // namespace shardscope
