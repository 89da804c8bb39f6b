#pragma once

// The builder the projection's cost files share (transformer_costs, moe_costs): a pass's ops in
// order, each priced on the profile's GPU as it is added. Internal to profiling/projection.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "profiling/projection/collective_model.h"
#include "profiling/projection/gpu_compute_model.h"
#include "profiling/projection/transformer_costs.h"

namespace shardscope::profiling::priced {

constexpr int kCompute = 2;   // bf16 matmul operands (an fp32 run's are 4: Pass::compute_bytes)
constexpr int kResidual = 4;  // fp32 residual stream, LayerNorms, loss

using Kind = PricedOp::Kind;

// Adds the ops of one pass in order.
class Pass {
 public:
  // `fp32`: the pass computes in fp32 (no autocast): its GEMMs and attention at the GPU's
  // measured fp32 rates.
  Pass(const HardwareProfile& hw, const HardwareProfile& group, std::vector<PricedOp>& ops,
       bool fp32 = false)
      : hw_(hw), group_(group), ops_(ops), fp32_(fp32) {}

  int compute_bytes() const { return fp32_ ? 4 : kCompute; }
  // A GEMM as this pass computes it.
  double gemm(int64_t m, int64_t n, int64_t k, int64_t batch = 1) const {
    return fp32_ ? fp32_gemm_seconds(hw_.gpu, m, n, k, batch)
                 : gemm_seconds(hw_.gpu, m, n, k, batch, kCompute);
  }
  void matmul(const std::string& name, int64_t m, int64_t n, int64_t k) {
    ops_.push_back({name, Kind::kMatmul, gemm_flops(m, n, k), 0, gemm(m, n, k), ""});
  }
  void attention(const std::string& name, int64_t batch_heads, int64_t seq, int64_t head_dim,
                 bool backward) {
    ops_.push_back({name, Kind::kAttention, attention_flops(batch_heads, seq, head_dim, backward),
                    0, attention_seconds(hw_.gpu, batch_heads, seq, head_dim, backward, fp32_),
                    ""});
  }
  void batched_matmul(const std::string& name, int64_t batch, int64_t m, int64_t n, int64_t k) {
    ops_.push_back(
        {name, Kind::kAttention, gemm_flops(m, n, k, batch), 0, gemm(m, n, k, batch), ""});
  }
  void memory(const std::string& name, double bytes) {
    ops_.push_back({name, Kind::kMemory, 0, bytes, memory_seconds(hw_.gpu, bytes), ""});
  }
  void append(const std::vector<PricedOp>& ops) { ops_.insert(ops_.end(), ops.begin(), ops.end()); }
  const HardwareProfile& hardware() const { return hw_; }
  void collective(const std::string& name, const std::string& op, double bytes, int ranks) {
    collective_beside_gemm(name, op, bytes, ranks, 0);  // nothing beside it: nothing hidden
  }
  // A collective started just before a GEMM of `gemm_s` on another stream and waited for after
  // it: the pair takes what the GPU measured two such streams take (pair_seconds), and what
  // that adds to the GEMM is the collective's time. On a GPU that measured nothing, the whole
  // collective.
  void collective_beside_gemm(const std::string& name, const std::string& op, double bytes,
                              int ranks, double gemm_s) {
    if (ranks <= 1 || bytes <= 0) return;
    const double s = estimate_collective(op, int64_t(bytes), ranks, group_).time_s;
    const GpuCompute::Contention contention = hw_.gpu.contention();
    const double exposed = contention.measured ? pair_seconds(gemm_s, s, contention) - gemm_s : s;
    ops_.push_back({name, Kind::kTensorComm, 0, bytes, exposed, op});
  }

 private:
  const HardwareProfile& hw_;
  const HardwareProfile& group_;
  std::vector<PricedOp>& ops_;
  bool fp32_;
};

// A Linear's forward [tokens x in] -> [tokens x out], and its two backward matmuls: the input's
// gradient, and the weight's (which a split backward defers to the weight pass).
struct Linear {
  std::string name;
  int64_t tokens, in, out;
  void forward(Pass& pass) const { pass.matmul(name, tokens, out, in); }
  void input_gradient(Pass& pass) const { pass.matmul(name + " dgrad", tokens, in, out); }
  void weight_gradient(Pass& pass) const { pass.matmul(name + " wgrad", in, out, tokens); }
};

}  // namespace shardscope::profiling::priced
