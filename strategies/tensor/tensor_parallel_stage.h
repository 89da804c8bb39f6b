#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <torch/types.h>

#include "engine/model/gpt_model.h"
#include "engine/state/training_state.h"
#include "engine/train/config.h"
#include "strategies/context/ring_attention.h"

namespace shardscope {

class Comm;

// Which part of the model a rank holds: blocks [first_block, last_block), the embeddings if it
// is the first pipeline stage, the final LayerNorm and LM head if it is the last, each cut into
// `tensor` Megatron shards of which this rank holds shard `tensor_rank`.
struct StageSpec {
  int first_block = 0;
  int last_block = 0;
  bool first = true;
  bool last = true;
};

// One rank's piece of a tensor- and pipeline-parallel GPT: query/key/value column-parallel with
// heads split across the tensor group, attention output projection row-parallel, MLP up column-
// and down row-parallel, vocabulary-parallel embedding and LM head with a parallel cross-entropy
// that never forms the full logits; LayerNorms, position embedding and row-parallel biases are
// replicated. Every shard is cut from the same full initialisation the reference uses. With a
// tensor group of one rank it is the plain model's stage.
class TensorParallelStage {
 public:
  TensorParallelStage(const Config& config, const StageSpec& spec, Comm& tensor_comm,
                      c10::Device device);

  // First stage: `input` holds token ids [B, T]; later stages the hidden state the previous
  // stage returned. The last stage returns the mean loss over `targets`, others the hidden state.
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& targets);
  // Shape of the hidden state that leaves (or enters) a stage for `sequences` sequences.
  std::vector<int64_t> hidden_shape(int64_t sequences) const;
  // Without sequence parallelism the hidden state between stages (and its gradient) is the same
  // on every rank of the tensor group: each rank sends only its 1/t of it to the next stage,
  // whose ranks gather the pieces over their own tensor group (Megatron's scatter-gather), so a
  // pipeline link carries 1/t of the bytes. Exact: the pieces are the whole's own values.
  bool hidden_replicated() const { return t_ > 1 && !config_.strategy_options.sequence_parallel; }
  int tensor_ranks() const { return t_; }
  // This rank's piece of a replicated hidden state (a contiguous view of its flat 1/t).
  torch::Tensor hidden_piece(const torch::Tensor& whole) const;
  // The whole of `shape` from every rank's piece; a collective over the tensor group.
  torch::Tensor gather_hidden(const torch::Tensor& piece, const std::vector<int64_t>& shape);

  // Context parallelism: this rank's tokens sit at `positions` of their sequences (its zig-zag
  // chunks) and attention is ring attention over `ring` (strategies/context/ring_attention.h).
  void set_context(const cp::Ring& ring, const torch::Tensor& positions) {
    ring_ = ring;
    positions_ = positions;
  }

  // While on, the Linears compute with one bf16 copy of each weight, made by the first forward
  // under bf16 autocast and kept for every forward after (the step's micro-batches share it, as
  // Megatron's share its bf16 weights); off drops the copies. The same values as casting in each
  // forward: autocast would cast the same weight (transposed, which F::linear does first) to the
  // same bf16. Only between optimizer steps: the copies do not follow the weights.
  void share_weight_casts(bool on);

  // With sequence parallelism each rank saw only its part of the sequence in the replicated
  // regions: their gradients are partial sums, made whole here (one all-reduce).
  void complete_replicated_gradients();

  const std::vector<torch::Tensor>& trainable() const { return trainable_; }
  const std::vector<std::string>& trainable_names() const { return trainable_names_; }
  // Parameters split across the tensor group, and those every rank of it holds whole.
  std::vector<torch::Tensor> sharded() const;
  std::vector<torch::Tensor> replicated() const;

  // For checkpoints: per parameter this rank holds, in the order of its shards, where the local
  // tensor sits in the full parameter (one region, or three for the stacked QKV thirds), with
  // the local tensor as the optimizer key. Replicated parameters are written by tensor rank 0.
  std::vector<std::vector<StateBinding::Entry>> state_entries() const;

  // This stage's full (uncut) parameters on the CPU; a collective over the tensor group.
  NamedTensors gathered_weights();
  int64_t parameter_bytes() const;
  // The full-model names and shapes of the parameters any stage holds (for receiving them).
  std::vector<std::pair<std::string, std::vector<int64_t>>> full_shapes(
      const StageSpec& spec) const;

 private:
  enum class Cut {
    kReplicated,
    kRows,     // dim 0 in t equal parts
    kColumns,  // dim 1 in t equal parts
    kQkvRows,  // dim 0 is [q; k; v]: each of the three cut in rows, this rank's thirds stacked
  };
  struct Shard {
    std::string name;
    Cut cut = Cut::kReplicated;
    torch::Tensor local;  // a leaf this rank trains
    torch::Tensor cast;   // its bf16 copy while share_weight_casts is on and a forward made it
  };

  static Cut cut_of(const std::string& name);
  // A Linear's weight as its matmul takes it: the shared bf16 copy while share_weight_casts is on
  // and autocast computes in bf16, else the parameter.
  torch::Tensor linear_weight(const std::string& name);
  static bool holds(const StageSpec& spec, const std::string& name);
  torch::Tensor cut(const torch::Tensor& full, Cut how) const;
  torch::Tensor uncut(const torch::Tensor& local, Cut how);
  const torch::Tensor& param(const std::string& name) const;
  torch::Tensor layer_norm(const torch::Tensor& x, const std::string& prefix) const;

  const Config& config_;
  StageSpec spec_;
  Comm& comm_;
  int t_ = 1;
  int rank_ = 0;
  std::vector<Shard> shards_;
  bool share_casts_ = false;
  std::map<std::string, size_t> index_;
  std::vector<torch::Tensor> trainable_;
  std::vector<std::string> trainable_names_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> model_shapes_;  // every parameter
  cp::Ring ring_;            // one rank: attention over the whole sequence here
  torch::Tensor positions_;  // undefined: 0..T-1
};

}  // namespace shardscope
