#include "profiling/projection/ring_attention_costs.h"

#include <algorithm>
#include <array>
#include <string>

#include "profiling/projection/collective_model.h"
#include "profiling/projection/gpu_compute_model.h"

namespace shardscope::profiling {

std::vector<RingStepPairs> ring_step_pairs(int rank, int ranks) {
  // The zig-zag split (cp::zigzag_chunks): ring rank i holds chunks i and 2c-1-i; a query chunk
  // attends a key chunk that is not later (cp::attends). Restated here, below the strategies;
  // RingAttentionCosts.PairsAreTheRingsOwn holds the two together.
  const auto chunks = [ranks](int r) { return std::array<int, 2>{r, 2 * ranks - 1 - r}; };
  const auto mine = chunks(rank);
  std::array<bool, 2> started{false, false};
  std::vector<RingStepPairs> steps(ranks);
  for (int step = 0; step < ranks; ++step) {
    const auto theirs = chunks((rank - step + ranks) % ranks);
    for (int qi = 0; qi < 2; ++qi) {
      for (int ki = 0; ki < 2; ++ki) {
        if (theirs[ki] > mine[qi]) continue;
        ++steps[step].pairs;
        if (theirs[ki] == mine[qi]) ++steps[step].diagonal;
        if (started[qi]) ++steps[step].merged;
        started[qi] = true;
      }
    }
  }
  return steps;
}

namespace {

using Kind = PricedOp::Kind;
using Count = RingAttentionOps::Count;

// One pass of the ring (forward or backward) as it is priced: its kernels, step by step, and
// what the host dispatches.
class RingPass {
 public:
  RingPass(const GpuCompute& gpu, Count& count) : gpu_(gpu), count_(count) {}

  // An operator with a kernel moving `bytes` (0: one that launches none, as empty_like).
  void op(const char* name, double bytes) {
    ++count_.ops;
    if (bytes > 0) add({name, Kind::kMemory, 0, bytes, memory_seconds(gpu_, bytes), ""});
  }
  // A kernel of an operator that dispatches others (the host pays for each, the census sees one).
  void inner_op(const char* name, double bytes) {
    ++count_.inner_ops;
    add({name, Kind::kMemory, 0, bytes, memory_seconds(gpu_, bytes), ""});
  }
  void views(int n) { count_.views += n; }
  // A transfer posted around the ring: its buffer (empty_like), then c10d's send and recv, each
  // an operator the host dispatches; their time on the link is the step's (end_step).
  void shift() { count_.ops += 3; }
  // fp32 batched GEMM: `batch` of [m x k] x [k x n].
  void matmul(const char* name, int64_t batch, int64_t m, int64_t n, int64_t k) {
    ++count_.matmuls;
    add({name, Kind::kAttention, gemm_flops(m, n, k, batch), 0,
         fp32_gemm_seconds(gpu_, m, n, k, batch), ""});
  }
  void add(PricedOp op) {
    step_s_ += op.seconds;
    ops_.push_back(std::move(op));
  }
  // Ends a ring step: its transfer of `transfer_s` ran under the step's kernels, or under the
  // host's dispatch of them where that took longer; the rest of it the step waits.
  void end_step(double transfer_s, double host_s) {
    const double covered = std::max(step_s_, host_s);
    if (transfer_s > covered)
      ops_.push_back({"ring wait", Kind::kTensorComm, 0, 0, transfer_s - covered, "send"});
    step_s_ = 0;
  }
  std::vector<PricedOp> take() { return std::move(ops_); }

 private:
  const GpuCompute& gpu_;
  Count& count_;
  std::vector<PricedOp> ops_;
  double step_s_ = 0;
};

struct Shape {
  double bh, L, D;                              // heads on this rank, chunk length, head size
  double chunk() const { return bh * L * D; }   // elements of one chunk of q, k, v or out
  double scores() const { return bh * L * L; }  // elements of one pair's scores
};

// The scores of one pair in fp32, masked on the diagonal: shared by forward and backward.
void pair_scores(RingPass& pass, const Shape& x, bool diagonal) {
  const int64_t bh = int64_t(x.bh), L = int64_t(x.L), D = int64_t(x.D);
  pass.views(1);  // k's transpose
  pass.matmul("ring scores", bh, L, L, D);
  pass.op("ring scale", 8 * x.scores());
  if (diagonal) {
    pass.op("ring mask ones", x.L * x.L);
    pass.op("ring mask triu", 2 * x.L * x.L);
    pass.op("ring mask fill", 9 * x.scores());
  }
}

// LibTorch's logsumexp over the last dimension, one operator that dispatches nine: amax, the
// infinite maxima zeroed (abs, eq, masked_fill_), exp(s - max) summed, log, the max added back.
// Nine kernels, four of them over the scores.
void logsumexp(RingPass& pass, const Shape& x) {
  const double rows = x.bh * x.L;
  pass.op("ring lse amax", 4 * x.scores());
  for (const char* small : {"ring lse abs", "ring lse eq", "ring lse fill"})
    pass.inner_op(small, 8 * rows);
  pass.inner_op("ring lse sub", 8 * x.scores());
  pass.inner_op("ring lse exp", 8 * x.scores());
  pass.inner_op("ring lse sum", 4 * x.scores());
  pass.inner_op("ring lse log", 8 * rows);
  pass.inner_op("ring lse add", 12 * rows);
}

void forward_pair(RingPass& pass, const Shape& x, bool diagonal, bool merged) {
  const int64_t bh = int64_t(x.bh), L = int64_t(x.L), D = int64_t(x.D);
  pass.views(3);  // q's chunk; the block's keys, their chunk
  pass.op("ring k to fp32", 6 * x.chunk());
  pair_scores(pass, x, diagonal);
  logsumexp(pass, x);
  pass.views(1);  // the lse unsqueezed
  pass.op("ring probs sub", 8 * x.scores());
  pass.op("ring probs exp", 8 * x.scores());
  pass.views(2);  // the block's values, their chunk
  pass.op("ring v to fp32", 6 * x.chunk());
  pass.matmul("ring probs x v", bh, L, D, L);
  if (!merged) return;
  // Online softmax: logaddexp, both parts re-weighted (sub, exp, unsqueeze, mul each), added.
  const double rows = x.bh * x.L;
  pass.op("ring logaddexp", 12 * rows);
  for (int part = 0; part < 2; ++part) {
    pass.op("ring merge sub", 12 * rows);
    pass.op("ring merge exp", 8 * rows);
    pass.views(1);
    pass.op("ring merge mul", 8 * x.chunk() + 4 * rows);
  }
  pass.op("ring merge add", 12 * x.chunk());
}

void backward_pair(RingPass& pass, const Shape& x, bool diagonal) {
  const int64_t bh = int64_t(x.bh), L = int64_t(x.L), D = int64_t(x.D);
  pass.views(2);  // the block's keys, their chunk
  pass.op("ring k to fp32", 6 * x.chunk());
  pass.views(2);  // the block's values, their chunk
  pass.op("ring v to fp32", 6 * x.chunk());
  pair_scores(pass, x, diagonal);
  pass.views(2);  // the lse unsqueezed, its chunk
  pass.op("ring probs sub", 8 * x.scores());
  pass.op("ring probs exp", 8 * x.scores());
  pass.views(3);  // dv's block and chunk, p transposed
  pass.matmul("ring dv", bh, L, D, L);
  pass.op("ring dv add", 12 * x.chunk());
  pass.views(3);  // v transposed; delta unsqueezed, its chunk
  pass.matmul("ring dp", bh, L, L, D);
  pass.op("ring ds sub", 8 * x.scores());
  pass.op("ring ds mul", 12 * x.scores());
  pass.views(1);  // dq's chunk
  pass.matmul("ring dq", bh, L, D, L);
  pass.op("ring dq add", 12 * x.chunk());
  pass.views(3);  // ds transposed; dk's block and chunk
  pass.matmul("ring dk", bh, L, D, L);
  pass.op("ring dk add", 12 * x.chunk());
}

double host_seconds(const Count& c, const GpuCompute& gpu) {
  const auto h = gpu.host_costs();
  return 1e-6 * (c.views * h.view_us + (c.ops + c.inner_ops) * h.op_us + c.matmuls * h.mm_us);
}

}  // namespace

RingAttentionOps ring_attention_ops(const HardwareProfile& hw, const HardwareProfile& ring,
                                    int64_t batch_heads, int64_t seq, int64_t head_dim, int ranks) {
  RingAttentionOps out;
  const Shape x{double(batch_heads), double(seq) / (2 * ranks), double(head_dim)};
  const double q = 2 * x.chunk();  // elements of a rank's q (or k, v, out): two chunks
  const auto steps = ring_step_pairs(0, ranks);  // every rank attends as many pairs
  // A block of keys and values in bf16; its gradients in fp32.
  const auto send = [&](double bytes) {
    return ranks > 1 ? estimate_collective("send", int64_t(bytes), 2, ring).time_s : 0.0;
  };
  const double block_s = send(2 * q * 2), gradient_s = send(2 * q * 4);
  const GpuCompute& gpu = hw.gpu;
  const auto step_host = [&](const Count& before, const Count& after) {
    const Count d{after.ops - before.ops, after.views - before.views,
                  after.matmuls - before.matmuls, after.inner_ops - before.inner_ops};
    return host_seconds(d, gpu);
  };

  RingPass forward(gpu, out.forward_count);
  forward.op("ring q to fp32", 6 * q);
  forward.op("ring stack k v", 8 * q);
  for (int step = 0; step < ranks; ++step) {
    const Count before = out.forward_count;
    if (step + 1 < ranks) forward.shift();
    const RingStepPairs& s = steps[step];
    for (int p = 0; p < s.pairs; ++p)
      forward_pair(forward, x, p < s.diagonal, p >= s.pairs - s.merged);
    forward.end_step(step + 1 < ranks ? block_s : 0, step_host(before, out.forward_count));
  }
  forward.op("ring output", 0);  // empty, then its transpose
  forward.views(1 + 2);
  for (int chunk = 0; chunk < 2; ++chunk) forward.op("ring output copy", 6 * x.chunk());
  forward.op("ring lse cat", 8 * x.bh * 2 * x.L);
  out.forward = forward.take();

  RingPass backward(gpu, out.backward_count);
  for (const char* to : {"ring q to fp32", "ring dout to fp32", "ring out to fp32"})
    backward.op(to, 6 * q);
  backward.op("ring delta mul", 12 * q);
  backward.op("ring delta sum", 4 * q);
  backward.op("ring dq zeros", 4 * q);
  backward.op("ring stack k v", 8 * q);
  for (int step = 0; step < ranks; ++step) {
    const Count before = out.backward_count;
    if (step + 1 < ranks) backward.shift();
    backward.op("ring dkv zeros", 8 * q);
    backward.views(4);  // q's and the output gradient's chunks, for each query chunk
    const RingStepPairs& s = steps[step];
    for (int p = 0; p < s.pairs; ++p) backward_pair(backward, x, p < s.diagonal);
    if (ranks > 1) {
      if (step > 0) backward.op("ring dkv add", 24 * q);  // what the block's holders added
      backward.shift();
    }
    // Under this step's pairs travel the next block and the gradients the step before sent on.
    backward.end_step(std::max(step + 1 < ranks ? block_s : 0, step > 0 ? gradient_s : 0),
                      step_host(before, out.backward_count));
  }
  // The last step's gradients go home under nothing.
  backward.end_step(ranks > 1 ? gradient_s : 0, 0);
  backward.views(2);  // dk and dv of the returned block
  for (const char* to : {"ring dq to bf16", "ring dk to bf16", "ring dv to bf16"})
    backward.op(to, 6 * q);
  out.backward = backward.take();

  // The function is one autograd-recorded operator forward and one node backward.
  const auto h = gpu.host_costs();
  out.forward_host_s = host_seconds(out.forward_count, gpu) + 1e-6 * (h.autograd_op_us - h.op_us);
  out.backward_host_s = host_seconds(out.backward_count, gpu) + 1e-6 * (h.node_us - h.op_us);
  return out;
}

}  // namespace shardscope::profiling
