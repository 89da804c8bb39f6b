// Every Comm op on rank threads against hand-computed results, at world 1..4, for empty, single,
// odd and larger tensors, in float32 and bfloat16, through native and emulated flat collectives,
// and staged through host copies (the path a CUDA tensor takes on Gloo, exercised here on CPU
// tensors: a wrong copy-back leaves the caller's output unwritten and fails every check).
#include <atomic>

#include <gtest/gtest.h>

#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "tests/support/rank_threads.h"

namespace shardscope {
namespace {

struct CommCase {
  int world;
  int64_t numel;
  c10::ScalarType dtype;
  bool emulate;
  bool staged = false;
  std::string backend = "gloo";
  // shm through slots and rings of a few hundred bytes (the path of rank processes where the
  // kernel refuses peer reads): every op then takes many rounds, and every message wraps around
  // its ring.
  bool small_segment = false;
  // shm reading the peers' tensors by address, as rank processes do (peer_reads.h).
  bool peer_reads = false;
};

void PrintTo(const CommCase& c, std::ostream* os) {
  *os << "world " << c.world << ", " << c.numel << " elements, " << c.dtype
      << (c.emulate ? ", emulated" : "") << (c.staged ? ", staged through host" : "") << ", "
      << c.backend << (c.small_segment ? " (small segment)" : "")
      << (c.peer_reads ? " (peer reads)" : "");
}

std::string case_name(const testing::TestParamInfo<CommCase>& info) {
  const auto& c = info.param;
  return "world" + std::to_string(c.world) + "_n" + std::to_string(c.numel) + "_" +
         (c.dtype == torch::kBFloat16 ? "bf16" : "f32") + (c.emulate ? "_emulated" : "") +
         (c.staged ? "_staged" : "") + "_" + c.backend + (c.small_segment ? "_small" : "") +
         (c.peer_reads ? "_peer_reads" : "");
}

class CommOps : public testing::TestWithParam<CommCase> {
 protected:
  void SetUp() override {
    if (GetParam().small_segment) {
      setenv("SHARDSCOPE_SHM_SLOT_BYTES", "384", 1);
      setenv("SHARDSCOPE_SHM_RING_BYTES", "128", 1);
      // Through the slots, as rank processes go without peer reads, rather than in place.
      setenv("SHARDSCOPE_SHM_PATH", "slots", 1);
    }
    if (GetParam().peer_reads) setenv("SHARDSCOPE_SHM_PATH", "peer-reads", 1);
  }
  void TearDown() override {
    unsetenv("SHARDSCOPE_SHM_SLOT_BYTES");
    unsetenv("SHARDSCOPE_SHM_RING_BYTES");
    unsetenv("SHARDSCOPE_SHM_PATH");
  }
  torch::Tensor full(double value) const {
    return torch::full({GetParam().numel}, value, torch::TensorOptions().dtype(GetParam().dtype));
  }
  // Small integers are exact in bfloat16, so every expected value below is exact too.
  void expect_all(const torch::Tensor& t, double value, const std::string& what, int rank) const {
    EXPECT_TRUE(torch::equal(t, full(value))) << what << " on rank " << rank << ": " << t;
  }
};

TEST_P(CommOps, AllReduceSumsEveryRank) {
  const int W = GetParam().world;
  test::run_on_ranks(
      W,
      [&](RankContext& ctx) {
        auto t = full(ctx.rank + 1);
        ctx.comm->all_reduce(t);
        expect_all(t, W * (W + 1) / 2, "all_reduce", ctx.rank);
        auto m = full(ctx.rank + 1);
        ctx.comm->all_reduce(m, c10d::ReduceOp::MAX);
        expect_all(m, W, "all_reduce max", ctx.rank);
      },
      GetParam().emulate, GetParam().staged, GetParam().backend);
}

TEST_P(CommOps, BroadcastCopiesTheRoot) {
  const int W = GetParam().world;
  test::run_on_ranks(
      W,
      [&](RankContext& ctx) {
        auto t = full(ctx.rank * 3 + 1);
        ctx.comm->broadcast(t, W - 1);
        expect_all(t, (W - 1) * 3 + 1, "broadcast", ctx.rank);
      },
      GetParam().emulate, GetParam().staged, GetParam().backend);
}

TEST_P(CommOps, AllGatherListAndFlat) {
  const int W = GetParam().world;
  test::run_on_ranks(
      W,
      [&](RankContext& ctx) {
        auto input = full(ctx.rank + 5);
        std::vector<torch::Tensor> outputs;
        for (int r = 0; r < W; ++r) outputs.push_back(full(-1));
        ctx.comm->all_gather(outputs, input);
        for (int r = 0; r < W; ++r)
          expect_all(outputs[r], r + 5, "all_gather[" + std::to_string(r) + "]", ctx.rank);

        auto flat = torch::full({W * GetParam().numel}, -1.0, input.options());
        ctx.comm->all_gather_into(flat, input);
        auto rows = flat.view({W, GetParam().numel});
        for (int r = 0; r < W; ++r) expect_all(rows[r], r + 5, "all_gather_into", ctx.rank);
      },
      GetParam().emulate, GetParam().staged, GetParam().backend);
}

TEST_P(CommOps, ReduceScatterListAndFlat) {
  const int W = GetParam().world;
  const int64_t n = GetParam().numel;
  test::run_on_ranks(
      W,
      [&](RankContext& ctx) {
        // Rank k contributes k*10 + i to destination i, so rank r receives sum_k (10k + r).
        std::vector<torch::Tensor> inputs;
        for (int i = 0; i < W; ++i) inputs.push_back(full(ctx.rank * 10 + i));
        auto out = full(-1);
        ctx.comm->reduce_scatter(out, inputs);
        expect_all(out, 10 * W * (W - 1) / 2 + W * ctx.rank, "reduce_scatter", ctx.rank);

        // Flat: chunk i of rank k holds (k + 1) * (i + 1); rank r gets (r + 1) * W(W+1)/2.
        auto input = torch::empty({W * n}, out.options());
        for (int i = 0; i < W; ++i) input.narrow(0, i * n, n).fill_((ctx.rank + 1) * (i + 1));
        auto flat_out = full(-1);
        ctx.comm->reduce_scatter_tensor(flat_out, input);
        expect_all(flat_out, (ctx.rank + 1) * W * (W + 1) / 2, "reduce_scatter_tensor", ctx.rank);
      },
      GetParam().emulate, GetParam().staged, GetParam().backend);
}

TEST_P(CommOps, ReduceGatherScatterToARoot) {
  const int W = GetParam().world;
  const int root = W - 1;
  test::run_on_ranks(
      W,
      [&](RankContext& ctx) {
        auto t = full(ctx.rank + 1);
        ctx.comm->reduce(t, root);
        if (ctx.rank == root) expect_all(t, W * (W + 1) / 2, "reduce", ctx.rank);

        std::vector<torch::Tensor> gathered;
        if (ctx.rank == root) {
          for (int r = 0; r < W; ++r) gathered.push_back(full(-1));
        }
        ctx.comm->gather(gathered, full(ctx.rank * 2), root);
        for (int r = 0; r < static_cast<int>(gathered.size()); ++r) {
          expect_all(gathered[r], r * 2, "gather[" + std::to_string(r) + "]", ctx.rank);
        }

        std::vector<torch::Tensor> pieces;
        if (ctx.rank == root) {
          for (int r = 0; r < W; ++r) pieces.push_back(full(r + 3));
        }
        auto mine = full(-1);
        ctx.comm->scatter(mine, pieces, root);
        expect_all(mine, ctx.rank + 3, "scatter", ctx.rank);
      },
      GetParam().emulate, GetParam().staged, GetParam().backend);
}

TEST_P(CommOps, AllToAllTransposesChunks) {
  const int W = GetParam().world;
  const int64_t n = GetParam().numel;
  test::run_on_ranks(
      W,
      [&](RankContext& ctx) {
        // Chunk j of rank r holds 10r + j; after the exchange chunk i of rank r holds 10i + r.
        auto input = torch::empty({W * n}, full(0).options());
        for (int j = 0; j < W; ++j) input.narrow(0, j * n, n).fill_(10 * ctx.rank + j);
        auto output = torch::full({W * n}, -1.0, input.options());
        ctx.comm->all_to_all(output, input);
        for (int i = 0; i < W; ++i) {
          expect_all(output.narrow(0, i * n, n), 10 * i + ctx.rank,
                     "all_to_all chunk " + std::to_string(i), ctx.rank);
        }
      },
      GetParam().emulate, GetParam().staged, GetParam().backend);
}

// Uneven splits (expert parallelism's dispatch): rank r sends r + j + 1 rows to rank j, except
// that nobody sends the last rank anything (it receives an empty tensor but still sends), so
// some pairs exchange nothing at all; every row says where it came from and where it went.
TEST_P(CommOps, AllToAllWithUnevenRows) {
  const int W = GetParam().world;
  const int64_t n = std::max<int64_t>(1, GetParam().numel % 5);  // values per row
  auto rows = [W](int from, int to) -> int64_t { return to == W - 1 && W > 1 ? 0 : from + to + 1; };
  test::run_on_ranks(
      W,
      [&](RankContext& ctx) {
        std::vector<int64_t> in_rows, out_rows;
        for (int j = 0; j < W; ++j) in_rows.push_back(rows(ctx.rank, j));
        for (int i = 0; i < W; ++i) out_rows.push_back(rows(i, ctx.rank));
        int64_t in_total = 0, out_total = 0;
        for (int j = 0; j < W; ++j) in_total += in_rows[j], out_total += out_rows[j];
        auto input = torch::empty({in_total, n}, full(0).options());
        int64_t at = 0;
        for (int j = 0; j < W; ++j) {
          input.narrow(0, at, in_rows[j]).fill_(10 * ctx.rank + j);
          at += in_rows[j];
        }
        auto output = torch::full({out_total, n}, -1.0, input.options());
        ctx.comm->all_to_all(output, input, out_rows, in_rows);
        at = 0;
        for (int i = 0; i < W; ++i) {
          const auto got = output.narrow(0, at, out_rows[i]);
          EXPECT_TRUE(got.eq(10 * i + ctx.rank).all().item<bool>())
              << "rows from rank " << i << " on rank " << ctx.rank << ": " << got;
          at += out_rows[i];
        }
        // Counts that do not add up to the tensor, or a count short, are refused.
        std::vector<int64_t> short_rows(in_rows.begin(), in_rows.end() - 1);
        EXPECT_THROW(ctx.comm->all_to_all(output, input, out_rows, short_rows),
                     std::invalid_argument);
        std::vector<int64_t> too_many = in_rows;
        too_many[0] += 1;
        EXPECT_THROW(ctx.comm->all_to_all(output, input, out_rows, too_many),
                     std::invalid_argument);
      },
      GetParam().emulate, GetParam().staged, GetParam().backend);
}

TEST_P(CommOps, SendRecvAroundARing) {
  const int W = GetParam().world;
  if (W == 1) GTEST_SKIP() << "no peer at world 1";
  test::run_on_ranks(
      W,
      [&](RankContext& ctx) {
        auto outgoing = full(ctx.rank + 1);
        auto incoming = full(-1);
        auto sent = ctx.comm->send_async(outgoing, (ctx.rank + 1) % W, /*tag=*/7);
        auto received = ctx.comm->recv_async(incoming, (ctx.rank + W - 1) % W, /*tag=*/7);
        sent.wait();
        received.wait();
        expect_all(incoming, (ctx.rank + W - 1) % W + 1, "recv", ctx.rank);
        ctx.comm->barrier();
      },
      GetParam().emulate, GetParam().staged, GetParam().backend);
}

TEST_P(CommOps, AsyncWorkCompletesAfterWait) {
  const int W = GetParam().world;
  test::run_on_ranks(
      W,
      [&](RankContext& ctx) {
        auto a = full(1), b = full(2);
        auto wa = ctx.comm->all_reduce_async(a);
        auto wb = ctx.comm->all_reduce_async(b);
        wb.wait();
        wa.wait();
        expect_all(a, W, "first async all_reduce", ctx.rank);
        expect_all(b, 2 * W, "second async all_reduce", ctx.rank);
      },
      GetParam().emulate, GetParam().staged, GetParam().backend);
}

// What DDP's Reducer does with a comm hook's work: it waits on the future and reads the bucket,
// without calling wait() on our work. The result must be in the caller's tensor by then.
TEST_P(CommOps, FutureDeliversTheResultIntoTheCallersTensor) {
  const int W = GetParam().world;
  test::run_on_ranks(
      W,
      [&](RankContext& ctx) {
        auto t = full(ctx.rank + 1);
        auto work = ctx.comm->all_reduce_async(t);
        auto future = work.future({t});
        future->wait();
        expect_all(t, W * (W + 1) / 2, "all_reduce seen through its future", ctx.rank);
        expect_all(future->value().toTensorVector().at(0), W * (W + 1) / 2, "the future's value",
                   ctx.rank);
        work.wait();
      },
      GetParam().emulate, GetParam().staged, GetParam().backend);
}

std::vector<CommCase> all_cases() {
  std::vector<CommCase> cases;
  for (int world : {1, 2, 3, 4}) {
    for (int64_t numel : {0, 1, 7, 1000}) {
      for (auto dtype : {torch::kFloat, torch::kBFloat16})
        cases.push_back({world, numel, dtype, false});
    }
    cases.push_back({world, 7, torch::kFloat, true});
    cases.push_back({world, 1000, torch::kBFloat16, true});
    for (int64_t numel : {0, 7}) cases.push_back({world, numel, torch::kFloat, false, true});
    cases.push_back({world, 1000, torch::kBFloat16, true, true});
  }
  // The same cases over the shared-memory backend, and the larger ones with a small segment.
  const size_t gloo_cases = cases.size();
  for (size_t i = 0; i < gloo_cases; ++i) {
    CommCase shm = cases[i];
    shm.backend = "shm";
    cases.push_back(shm);
    if (shm.numel >= 7) {
      CommCase small = shm, reads = shm;
      small.small_segment = true;
      reads.peer_reads = true;
      cases.push_back(small);
      cases.push_back(reads);
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Comm, CommOps, testing::ValuesIn(all_cases()), case_name);

// Rank threads share one process, so anything LibTorch keeps per process is shared by every
// rank. ProcessGroup::barrier once kept its placeholder tensor in such a static: barriers
// entered together freed it twice and corrupted the heap (calibrate aborted 1 run in 30).
TEST(CommBarrier, ManyBarriersEnteredTogetherOnEveryRank) {
  const int W = 4;
  std::atomic<int> passed{0};
  test::run_on_ranks(W, [&](RankContext& ctx) {
    for (int i = 0; i < 1000; ++i) ctx.comm->barrier();
    // Each rank's count is only complete once every rank is through the last barrier.
    passed.fetch_add(1);
    ctx.comm->barrier();
    EXPECT_EQ(passed.load(), W);
  });
}

TEST(CommRecording, SameCollectiveHasSameSequenceOnEveryRank) {
  const int W = 3;
  auto report = test::run_on_ranks(W, [&](RankContext& ctx) {
    auto t = torch::ones({5});
    ctx.comm->all_reduce(t);
    auto w = ctx.comm->all_reduce_async(t);
    w.wait();
    auto flat = torch::empty({5 * W});
    ctx.comm->all_gather_into(flat, t);
  });
  ASSERT_TRUE(report.ok());
  for (int r = 0; r < W; ++r) {
    auto events = report.logs[r]->snapshot();
    ASSERT_EQ(events.size(), 3u);
    const std::vector<std::string> ops{"all_reduce", "all_reduce", "all_gather_into"};
    for (size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].op, ops[i]);
      EXPECT_EQ(events[i].seq, i);
      EXPECT_EQ(events[i].bytes, 20);
      EXPECT_EQ(events[i].group_size, W);
      EXPECT_GT(events[i].t_complete_ns, 0);
      EXPECT_GE(events[i].t_wait_end_ns, events[i].t_issue_ns);
    }
    EXPECT_FALSE(events[0].async);
    EXPECT_TRUE(events[1].async);
  }
}

TEST(CommRecording, PointToPointCallsArePairedByNumber) {
  auto report = test::run_on_ranks(3, [&](RankContext& ctx) {
    auto t = torch::ones({3});
    // Rank 0 sends twice to rank 1 and once to rank 2; numbering is per peer and direction.
    if (ctx.rank == 0) {
      ctx.comm->send(t, 1);
      ctx.comm->send(t, 2);
      ctx.comm->send(t, 1);
    } else {
      ctx.comm->recv(t, 0);
      if (ctx.rank == 1) ctx.comm->recv(t, 0);
    }
  });
  ASSERT_TRUE(report.ok());
  auto sends = report.logs[0]->snapshot();
  ASSERT_EQ(sends.size(), 3u);
  EXPECT_EQ(sends[0].seq, 0u);  // to 1
  EXPECT_EQ(sends[1].seq, 0u);  // to 2
  EXPECT_EQ(sends[2].seq, 1u);  // to 1 again
  auto at1 = report.logs[1]->snapshot();
  ASSERT_EQ(at1.size(), 2u);
  EXPECT_EQ(at1[1].op, "recv");
  EXPECT_EQ(at1[1].peer, 0);
  EXPECT_EQ(at1[1].seq, 1u);
}

TEST(CommValidation, MismatchedFlatSizesAreRejected) {
  test::run_on_ranks(2, [&](RankContext& ctx) {
    auto out = torch::empty({3});
    auto in = torch::empty({5});
    EXPECT_THROW(ctx.comm->all_gather_into(out, in), std::invalid_argument);
    EXPECT_THROW(ctx.comm->reduce_scatter_tensor(out, in), std::invalid_argument);
    EXPECT_THROW(ctx.comm->broadcast(in, 2), std::invalid_argument);
    std::vector<torch::Tensor> none;
    EXPECT_THROW(ctx.comm->gather(none, in, ctx.rank),
                 std::invalid_argument);  // root needs outputs
    auto odd = torch::empty({3});
    EXPECT_THROW(ctx.comm->all_to_all(odd, odd), std::invalid_argument);
  });
}

}  // namespace
}  // namespace shardscope
