#include "strategies/context/ring_attention.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "profiling/record/host_tracing.h"

namespace shardscope::cp {

std::array<int, 2> zigzag_chunks(int rank, int ranks) {
  return {rank, 2 * ranks - 1 - rank};
}

torch::Tensor zigzag_positions(int64_t seq, int rank, int ranks) {
  const int64_t chunk = seq / (2 * ranks);
  std::vector<torch::Tensor> parts;
  for (int c : zigzag_chunks(rank, ranks))
    parts.push_back(torch::arange(c * chunk, (c + 1) * chunk));
  return torch::cat(parts);
}

bool attends(int query_chunk, int key_chunk) {
  return key_chunk <= query_chunk;
}

int attended_pairs(const std::array<int, 2>& query_chunks, int chunks) {
  int pairs = 0;
  for (int q : query_chunks) {
    for (int k = 0; k < chunks; ++k) pairs += attends(q, k) ? 1 : 0;
  }
  return pairs;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Tags keep the two streams of a ring apart: blocks of keys and values, and their gradients.
constexpr int kBlockTag = 0;
constexpr int kGradientTag = 1;

// The ring's block maths runs in fp32 and outside autocast (which would put the matmuls back in
// bf16), like flash attention's softmax statistics.
struct Fp32Maths {
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::autocast_dispatch_keyset};
  torch::NoGradGuard no_grad;
};

torch::Tensor fp32(const torch::Tensor& t) {
  return t.to(torch::kFloat);
}

// Chunk `which` (0 or 1) of a [.., 2L, D] tensor along the sequence.
torch::Tensor chunk_of(const torch::Tensor& t, int which) {
  const int64_t half = t.size(-2) / 2;
  return t.narrow(-2, which * half, half);
}

// Scores of one chunk pair, with the causal mask on the diagonal.
torch::Tensor scores(const torch::Tensor& q, const torch::Tensor& k, double scale, bool diagonal) {
  auto s = torch::matmul(q, k.transpose(-2, -1)) * scale;
  if (diagonal) {
    const int64_t n = s.size(-1);
    auto later = torch::ones({n, n}, torch::dtype(torch::kBool).device(s.device())).triu(1);
    s.masked_fill_(later, -std::numeric_limits<float>::infinity());
  }
  return s;
}

// The ring's neighbours: blocks go to the next rank and come from the previous one.
int next_of(const Ring& r) {
  return (r.rank + 1) % r.ranks;
}
int previous_of(const Ring& r) {
  return (r.rank + r.ranks - 1) % r.ranks;
}
// Whose block a rank holds at ring step `step`.
int holder_of(const Ring& r, int step) {
  return (r.rank - step + r.ranks) % r.ranks;
}

// A pending shift of one block one place around the ring (nothing to do with one rank).
struct Shift {
  CommWork sent, received;
  torch::Tensor incoming;
  torch::Tensor outgoing;  // kept alive until its send completes
  bool pending = false;

  void start(const Ring& r, const torch::Tensor& block, int tag) {
    outgoing = block;
    incoming = torch::empty_like(block);
    sent = r.comm->send_async(outgoing, next_of(r), tag);
    received = r.comm->recv_async(incoming, previous_of(r), tag);
    pending = true;
  }
  torch::Tensor finish() {
    received.wait();
    sent.wait();
    pending = false;
    outgoing = torch::Tensor();
    return std::move(incoming);
  }
};

std::string step_name(const char* pass, const Ring& r, int step) {
  return std::string(pass) + " ring attention: keys of rank " + std::to_string(holder_of(r, step));
}

class RingAttentionFunction : public torch::autograd::Function<RingAttentionFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, Ring ring) {
    Fp32Maths maths;
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const auto mine = zigzag_chunks(ring.rank, ring.ranks);
    const auto qf = fp32(q);
    std::array<torch::Tensor, 2> out, lse;  // per query chunk, merged over key blocks
    // Blocks travel in the inputs' dtype (bf16 under autocast, as a real ring sends them) and are
    // widened only for the maths.
    auto block = torch::stack({k, v});
    Shift shift;
    for (int step = 0; step < ring.ranks; ++step) {
      // Post the next block's transfer first: it travels while this one is computed on.
      if (step + 1 < ring.ranks) shift.start(ring, block, kBlockTag);
      {
        profiling::ScopedSpan span(profiling::Category::kForward, step_name("forward", ring, step));
        const auto theirs = zigzag_chunks(holder_of(ring, step), ring.ranks);
        for (int qi = 0; qi < 2; ++qi) {
          for (int ki = 0; ki < 2; ++ki) {
            if (!attends(mine[qi], theirs[ki])) continue;
            auto s = scores(chunk_of(qf, qi), fp32(chunk_of(block[0], ki)), scale,
                            mine[qi] == theirs[ki]);
            auto block_lse = s.logsumexp(-1);
            auto block_out =
                torch::matmul((s - block_lse.unsqueeze(-1)).exp(), fp32(chunk_of(block[1], ki)));
            if (!out[qi].defined()) {
              out[qi] = block_out, lse[qi] = block_lse;
              continue;
            }
            // Online softmax: both parts re-weighted to the merged normaliser.
            auto merged = torch::logaddexp(lse[qi], block_lse);
            out[qi] = out[qi] * (lse[qi] - merged).exp().unsqueeze(-1) +
                      block_out * (block_lse - merged).exp().unsqueeze(-1);
            lse[qi] = merged;
          }
        }
      }
      if (shift.pending) block = shift.finish();
    }
    // [B, 2L, H, D] memory: the attention projection's input, as scaled_dot_product_attention
    // lays its output out, so the transpose back costs no copy.
    auto result =
        torch::empty({q.size(0), q.size(2), q.size(1), q.size(3)}, q.options()).transpose(1, 2);
    for (int qi = 0; qi < 2; ++qi) chunk_of(result, qi).copy_(out[qi]);
    auto row_lse = torch::cat({lse[0], lse[1]}, -1);
    ctx->save_for_backward({q, k, v, result, row_lse});
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(ring.comm);
    ctx->saved_data["rank"] = ring.rank;
    ctx->saved_data["ranks"] = ring.ranks;
    return result;
  }

  // Flash attention's backward per block, with the block's key/value gradients travelling
  // around the ring behind it: a block comes back to its owner after c steps carrying every
  // rank's contribution.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Fp32Maths maths;
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    Ring ring;
    ring.comm = reinterpret_cast<Comm*>(ctx->saved_data["comm"].toInt());
    ring.rank = static_cast<int>(ctx->saved_data["rank"].toInt());
    ring.ranks = static_cast<int>(ctx->saved_data["ranks"].toInt());
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const auto mine = zigzag_chunks(ring.rank, ring.ranks);
    const auto qf = fp32(q), dout = fp32(grads[0]);
    const auto delta = (dout * fp32(out)).sum(-1);  // rowsum(dO o O), softmax's backward term
    auto dq = torch::zeros_like(qf);
    auto block = torch::stack({k, v});
    Shift block_shift, gradient_shift;
    torch::Tensor own_gradient;  // with one rank, nothing travels
    for (int step = 0; step < ring.ranks; ++step) {
      if (step + 1 < ring.ranks) block_shift.start(ring, block, kBlockTag);
      // Gradients accumulate, and travel, in fp32.
      auto dblock = torch::zeros(block.sizes(), block.options().dtype(torch::kFloat));
      {
        profiling::ScopedSpan span(profiling::Category::kBackward,
                                   step_name("backward", ring, step));
        const auto theirs = zigzag_chunks(holder_of(ring, step), ring.ranks);
        for (int qi = 0; qi < 2; ++qi) {
          const auto qc = chunk_of(qf, qi), doc = chunk_of(dout, qi);
          for (int ki = 0; ki < 2; ++ki) {
            if (!attends(mine[qi], theirs[ki])) continue;
            const auto kc = fp32(chunk_of(block[0], ki)), vc = fp32(chunk_of(block[1], ki));
            auto s = scores(qc, kc, scale, mine[qi] == theirs[ki]);
            auto p = (s - chunk_of(lse.unsqueeze(-1), qi)).exp();
            chunk_of(dblock[1], ki).add_(torch::matmul(p.transpose(-2, -1), doc));
            auto ds =
                p * (torch::matmul(doc, vc.transpose(-2, -1)) - chunk_of(delta.unsqueeze(-1), qi));
            chunk_of(dq, qi).add_(torch::matmul(ds, kc), scale);
            chunk_of(dblock[0], ki).add_(torch::matmul(ds.transpose(-2, -1), qc), scale);
          }
        }
      }
      if (ring.ranks > 1) {
        // What the previous holders of this block added, then on to the next one.
        if (gradient_shift.pending) dblock.add_(gradient_shift.finish());
        gradient_shift.start(ring, dblock, kGradientTag);
      } else {
        own_gradient = dblock;
      }
      if (block_shift.pending) block = block_shift.finish();
    }
    // After c steps every block's gradient is back with its owner.
    auto dkv = ring.ranks > 1 ? gradient_shift.finish() : own_gradient;
    return {dq.to(q.scalar_type()), dkv[0].to(k.scalar_type()), dkv[1].to(v.scalar_type()),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor ring_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const Ring& ring) {
  TORCH_CHECK(q.size(-2) % 2 == 0, "ring attention needs the rank's two chunks of equal length");
  return RingAttentionFunction::apply(q, k, v, ring);
}

}  // namespace shardscope::cp
