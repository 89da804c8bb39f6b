#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/train/config.h"

namespace shardscope {

// How the ranks of a model-parallel run are arranged: d data-parallel replicas, each a pipeline
// of p stages, each stage split over t tensor-parallel ranks and, with context parallelism, over
// c context ranks that each hold 2 of every sequence's 2c chunks (ring attention). Ranks are
// numbered as Megatron does: tensor-parallel ranks adjacent (they talk most), then context,
// then data, pipeline outermost.
struct ParallelLayout {
  int data = 1;
  int pipeline = 1;
  int tensor = 1;
  int context = 1;

  struct Coordinates {
    int data = 0;
    int pipeline = 0;
    int tensor = 0;
    int context = 0;
  };

  int world() const { return data * pipeline * tensor * context; }
  Coordinates coordinates(int rank) const;
  int rank_of(const Coordinates& at) const;

  // The members of `rank`'s groups as world ranks, in group order.
  std::vector<int> tensor_group(int rank) const;  // same stage, replica and context rank
  // Same replica, tensor and context rank, in stage order.
  std::vector<int> pipeline_group(int rank) const;
  std::vector<int> data_group(int rank) const;     // same stage, tensor and context rank
  std::vector<int> context_group(int rank) const;  // same stage, replica and tensor rank (a ring)
  // Every rank that holds the same shards of the same stage: what averages gradients (the data
  // and context dimensions together).
  std::vector<int> gradient_group(int rank) const;
  // Every rank of a replica that computes on the same tokens: its stages and shards.
  std::vector<int> model_group(int rank) const;
  // Every rank that computes on the same sequences (one replica: all its stages, shards and
  // context ranks).
  std::vector<int> replica_group(int rank) const;

  // "dp2 x tp2 x pp2", leaving out degrees of 1.
  std::string describe() const;
};

// The layout a tp / pp / hybrid configuration asks for: explicit degrees as given, the
// strategy's own dimension (tensor for tp, pipeline for pp, data for hybrid) takes what is left
// of the world. Throws ConfigError naming the field when the degrees cannot make up the world.
ParallelLayout layout_of(const Config& config);

// Pipeline micro-batches per step (strategy_options.micro_batches, or one per stage).
int pipeline_micro_batches(const Config& config, const ParallelLayout& layout);
// Pipeline stages per rank (strategy_options.stages_per_rank, or the schedule's default).
int pipeline_stages_per_rank(const Config& config);

// Blocks [first, last) of each of `stages` contiguous stages: at least one block each, the
// embeddings on the first stage and the final LayerNorm and LM head on the last, chosen so that
// the largest stage holds as few parameters as possible.
std::vector<std::pair<int, int>> stage_blocks(const ModelConfig& model, int stages);

// Rejects layouts the model cannot be cut into (degrees not dividing heads, vocabulary, MLP
// width or sequence; more stages than blocks; micro-batches not dividing the sequences).
void validate_layout(const Config& config, const ParallelLayout& layout);

}  // namespace shardscope
