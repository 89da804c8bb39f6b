// What the projection prices for context parallelism's ring attention
// (profiling/projection/ring_attention_costs) is what the ring runs: its chunk pairs are the
// zig-zag split's, and the operators, views and matmuls it counts are those a real ring of c rank
// threads dispatches, forward and backward, counted with a RecordFunction observer.
#include "profiling/projection/ring_attention_costs.h"

#include <gtest/gtest.h>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "profiling/projection/hardware_profile.h"
#include "strategies/context/ring_attention.h"
#include "tests/support/rank_threads.h"

namespace shardscope {
namespace {

TEST(RingAttentionCosts, PairsAreTheRingsOwn) {
  for (int c = 1; c <= 4; ++c) {
    for (int rank = 0; rank < c; ++rank) {
      const auto steps = profiling::ring_step_pairs(rank, c);
      ASSERT_EQ(int(steps.size()), c);
      const auto mine = cp::zigzag_chunks(rank, c);
      int total = 0, diagonal = 0, merged = 0;
      for (int step = 0; step < c; ++step) {
        const auto theirs = cp::zigzag_chunks((rank - step + c) % c, c);
        int pairs = 0;
        for (int q : mine)
          for (int k : theirs) pairs += cp::attends(q, k);
        EXPECT_EQ(steps[step].pairs, pairs) << "c " << c << " rank " << rank << " step " << step;
        total += steps[step].pairs;
        diagonal += steps[step].diagonal;
        merged += steps[step].merged;
      }
      EXPECT_EQ(total, cp::attended_pairs(mine, 2 * c));
      EXPECT_EQ(diagonal, 2);        // each of its chunks with itself
      EXPECT_EQ(merged, total - 2);  // every pair of a query chunk after its first
    }
  }
}

// Counts the operators one thread dispatches at the top level of the ring: in forward those it
// calls itself, in backward those its node calls.
struct Census {
  std::atomic<std::thread::id> thread{};
  bool in_node = false;  // count only inside the ring's backward node
  std::mutex mutex;
  int ops = 0, views = 0, matmuls = 0;
};
std::atomic<Census*> census{nullptr};
thread_local int depth = 0;
thread_local int node_depth = -1;  // the ring's backward node's, while it runs

bool is_view(const std::string& name) {
  static const std::set<std::string> kViews = {"aten::narrow",    "aten::select", "aten::transpose",
                                               "aten::unsqueeze", "aten::view",   "aten::slice"};
  return kViews.count(name) > 0;
}

bool is_ring_node(const at::RecordFunction& fn) {
  return fn.scope() == at::RecordScope::BACKWARD_FUNCTION &&
         std::string(fn.name()).find("RingAttention") != std::string::npos;
}

std::unique_ptr<at::ObserverContext> begins(const at::RecordFunction& fn) {
  const int d = depth++;
  Census* c = census.load();
  if (c == nullptr || std::this_thread::get_id() != c->thread.load()) return nullptr;
  if (is_ring_node(fn)) node_depth = d;
  const int base = c->in_node ? node_depth + 1 : 0;
  if (fn.scope() != at::RecordScope::FUNCTION || (c->in_node && node_depth < 0) || d != base)
    return nullptr;
  const std::string name = fn.name();
  std::lock_guard<std::mutex> lock(c->mutex);
  if (name == "aten::matmul")
    ++c->matmuls;
  else if (is_view(name))
    ++c->views;
  else
    ++c->ops;
  return nullptr;
}
void ends(const at::RecordFunction& fn, at::ObserverContext*) {
  --depth;
  if (is_ring_node(fn)) node_depth = -1;
}

TEST(RingAttentionCosts, OperatorsAreWhatTheRingDispatches) {
  const auto hw = profiling::load_hardware_profile("8xH100");
  const int64_t batch = 2, heads = 2, seq = 24, dim = 8;
  for (const int c : {1, 2, 3}) {
    Census forward, backward;
    const auto handle = at::addGlobalCallback(
        at::RecordFunctionCallback(begins, ends)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    test::run_on_ranks(c, [&](RankContext& ctx) {
      torch::manual_seed(ctx.rank);
      const auto opts = torch::dtype(torch::kBFloat16).requires_grad(true);
      auto q = torch::randn({batch, heads, seq / c, dim}, opts);
      auto k = torch::randn({batch, heads, seq / c, dim}, opts);
      auto v = torch::randn({batch, heads, seq / c, dim}, opts);
      const cp::Ring ring{ctx.comm, ctx.rank, c};
      auto grad = torch::ones({batch, heads, seq / c, dim}, torch::kBFloat16);
      if (ctx.rank == 0) forward.thread = std::this_thread::get_id(), census = &forward;
      auto out = cp::ring_attention(q, k, v, ring);
      if (ctx.rank == 0) {
        backward.thread = std::this_thread::get_id();
        backward.in_node = true;
        census = &backward;
      }
      out.backward(grad);
      if (ctx.rank == 0) census = nullptr;
    });
    at::removeCallback(handle);
    const auto priced = profiling::ring_attention_ops(hw, hw, batch * heads, seq, dim, c);
    const auto expect = [&](const Census& seen, const profiling::RingAttentionOps::Count& count,
                            const char* pass) {
      EXPECT_EQ(count.ops, seen.ops) << pass << ", c " << c;
      EXPECT_EQ(count.views, seen.views) << pass << ", c " << c;
      EXPECT_EQ(count.matmuls, seen.matmuls) << pass << ", c " << c;
    };
    expect(forward, priced.forward_count, "forward");
    expect(backward, priced.backward_count, "backward");
  }
}

}  // namespace
}  // namespace shardscope
