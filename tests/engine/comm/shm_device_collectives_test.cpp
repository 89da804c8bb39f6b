// The shm backend's collectives that stay on a device (engine/comm/shm/device_collectives.h):
// their order and aliasing on host tensors of rank threads (SHARDSCOPE_SHM_CUDA=everywhere, no GPU
// needed), and on CUDA tensors where a GPU is present, each against the host path bitwise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/comm/shm/device_collectives.h"
#include "engine/launch/launcher.h"
#include "tests/support/rank_threads.h"

namespace shardscope {
namespace {

// Sets SHARDSCOPE_SHM_CUDA for the scope (nullptr: unset).
class ShmCudaPath {
 public:
  explicit ShmCudaPath(const char* value) {
    if (value != nullptr)
      setenv("SHARDSCOPE_SHM_CUDA", value, 1);
    else
      unsetenv("SHARDSCOPE_SHM_CUDA");
  }
  ~ShmCudaPath() { unsetenv("SHARDSCOPE_SHM_CUDA"); }
};

// Rank r's input: values seeded by r, awkward length (not a multiple of the world).
torch::Tensor input_of(int rank, int64_t n) {
  return torch::randn({n}, torch::Generator(at::detail::createCPUGenerator(300 + rank)));
}

struct Results {
  std::vector<torch::Tensor> all_reduce, all_reduce_avg, all_gather, reduce_scatter,
      reduce_scatter_in_place;
  std::vector<uint64_t> staged;  // each rank's calls that Comm copied through the host
};

// Every collective the device path serves, on `world` rank threads over shm with tensors on
// `device`, each rank's results brought back to the host. `through_comm`: called as the
// strategies call them, through Comm (which must hand the device path its tensors as they are),
// rather than on the process group.
Results collectives_on(const torch::Device& device, int world, int64_t n,
                       bool through_comm = false) {
  Results out;
  for (auto* v : {&out.all_reduce, &out.all_reduce_avg, &out.all_gather, &out.reduce_scatter,
                  &out.reduce_scatter_in_place})
    v->resize(world);
  out.staged.resize(world);
  LaunchSpec spec;
  spec.world = world;
  spec.backend = "shm";
  spec.threads_per_rank = 1;
  spec.device = device.str();
  const LaunchReport report = launch_rank_threads(spec, [&](RankContext& ctx) {
    auto& pg = *ctx.comm->process_group();
    Comm& comm = *ctx.comm;
    const uint64_t staged_before = comm.host_staged_calls();
    const int r = ctx.rank;
    const auto all_reduce = [&](torch::Tensor& t, c10d::ReduceOp op) {
      if (through_comm) return comm.all_reduce(t, op);
      std::vector<torch::Tensor> ts{t};
      c10d::AllreduceOptions options;
      options.reduceOp = op;
      pg.allreduce(ts, options)->wait();
    };
    const auto gather = [&](torch::Tensor& out, torch::Tensor& in) {
      through_comm ? comm.all_gather_into(out, in) : (void)pg._allgather_base(out, in)->wait();
    };
    const auto scatter = [&](torch::Tensor& out, torch::Tensor& in) {
      through_comm ? comm.reduce_scatter_tensor(out, in)
                   : (void)pg._reduce_scatter_base(out, in)->wait();
    };
    std::vector<torch::Tensor> sum{input_of(r, n).to(device)};
    all_reduce(sum[0], c10d::ReduceOp::SUM);
    std::vector<torch::Tensor> avg{input_of(r, n).to(device)};
    all_reduce(avg[0], c10d::ReduceOp::AVG);
    torch::Tensor piece = input_of(r, n).to(device), gathered = torch::empty({world * n}, device);
    gather(gathered, piece);
    torch::Tensor whole = input_of(r, world * n).to(device), mine = torch::empty({n}, device);
    scatter(mine, whole);
    // Into its own part of the input, as FSDP's in-place reduce-scatter does.
    torch::Tensor own = input_of(r, world * n).to(device);
    torch::Tensor own_part = own.narrow(0, r * n, n);
    scatter(own_part, own);
    if (device.is_cuda()) torch::cuda::synchronize();
    out.all_reduce[r] = sum[0].cpu();
    out.all_reduce_avg[r] = avg[0].cpu();
    out.all_gather[r] = gathered.cpu();
    out.reduce_scatter[r] = mine.cpu();
    out.reduce_scatter_in_place[r] = own_part.cpu();
    out.staged[r] = comm.host_staged_calls() - staged_before;
  });
  EXPECT_TRUE(report.ok()) << (report.ok() ? "" : report.root_failure()->message);
  return out;
}

// ((x0 + x1) + x2) + ... of `of(r)`, as every shm path sums.
torch::Tensor in_rank_order(int world, const std::function<torch::Tensor(int)>& of) {
  torch::Tensor sum = of(0).clone();
  for (int r = 1; r < world; ++r) sum = sum + of(r);
  return sum;
}

void expect_in_rank_order(const Results& got, int world, int64_t n, const std::string& how) {
  const torch::Tensor sum = in_rank_order(world, [&](int r) { return input_of(r, n); });
  torch::Tensor gathered = torch::cat([&] {
    std::vector<torch::Tensor> parts;
    for (int r = 0; r < world; ++r) parts.push_back(input_of(r, n));
    return parts;
  }());
  for (int r = 0; r < world; ++r) {
    const torch::Tensor scattered =
        in_rank_order(world, [&](int q) { return input_of(q, world * n).narrow(0, r * n, n); });
    EXPECT_TRUE(torch::equal(got.all_reduce[r], sum)) << how << ", rank " << r;
    EXPECT_TRUE(torch::equal(got.all_reduce_avg[r], sum / world)) << how << ", rank " << r;
    EXPECT_TRUE(torch::equal(got.all_gather[r], gathered)) << how << ", rank " << r;
    EXPECT_TRUE(torch::equal(got.reduce_scatter[r], scattered)) << how << ", rank " << r;
    EXPECT_TRUE(torch::equal(got.reduce_scatter_in_place[r], scattered)) << how << ", rank " << r;
  }
}

TEST(ShmDeviceCollectives, ReduceAndGatherInRankOrderAsTheHostPathsDo) {
  const int64_t n = 1000003;  // not a multiple of any world: shares of unequal length
  for (int world : {1, 2, 3, 4}) {
    {
      const ShmCudaPath path("everywhere");
      expect_in_rank_order(collectives_on(torch::kCPU, world, n), world, n,
                           "device path, world " + std::to_string(world));
      expect_in_rank_order(collectives_on(torch::kCPU, world, n, /*through_comm=*/true), world, n,
                           "device path through Comm, world " + std::to_string(world));
    }
    const ShmCudaPath path(nullptr);
    expect_in_rank_order(collectives_on(torch::kCPU, world, n), world, n,
                         "host path, world " + std::to_string(world));
  }
}

TEST(ShmDeviceCollectives, TakesContiguousCudaTensorsUnlessToldToStageThemThroughTheHost) {
  const torch::Tensor host = torch::ones({8});
  {
    const ShmCudaPath path(nullptr);
    EXPECT_FALSE(shm::DeviceCollectives::takes(host, true));
  }
  {
    const ShmCudaPath path("everywhere");
    EXPECT_TRUE(shm::DeviceCollectives::takes(host, true));
    EXPECT_FALSE(shm::DeviceCollectives::takes(host, false));  // no host memory across processes
    EXPECT_FALSE(shm::DeviceCollectives::takes(torch::ones({4, 4}).t(), true));  // strided
  }
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device for the rest";
  const torch::Tensor cuda = torch::ones({8}, torch::kCUDA);
  {
    const ShmCudaPath path(nullptr);
    EXPECT_TRUE(shm::DeviceCollectives::takes(cuda, false));
  }
  const ShmCudaPath path("host");
  EXPECT_FALSE(shm::DeviceCollectives::takes(cuda, false));
}

// On a GPU: CUDA tensors of rank threads take the device path by default, and agree bitwise with
// the same collectives staged through the host.
TEST(ShmDeviceCollectives, CudaTensorsOfRankThreadsEqualTheHostPathBitwise) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int64_t n = 1 << 20;
  for (int world : {2, 4}) {
    const ShmCudaPath path(nullptr);
    expect_in_rank_order(collectives_on(torch::kCUDA, world, n), world, n,
                         "cuda, world " + std::to_string(world));
    const Results through_comm = collectives_on(torch::kCUDA, world, n, /*through_comm=*/true);
    expect_in_rank_order(through_comm, world, n,
                         "cuda through Comm, world " + std::to_string(world));
    // Handed over as they are: results equal either way, so the count is what tells.
    for (int r = 0; r < world; ++r) EXPECT_EQ(through_comm.staged[r], 0u) << "rank " << r;
  }
}

// Comm hands shm's device path the tensors it carries as they are. It once staged every CUDA
// tensor of a non-NCCL group through pageable host memory, so a rank sharing an H100 copied each
// 12 MB gradient bucket out for 8-9 ms inside its turn and the device path never ran in a step.
TEST(ShmDeviceCollectives, CommStagesCudaTensorsOnlyWhereTheBackendCannotTakeThem) {
  StagingCase gloo;
  gloo.cuda_tensor = true;
  EXPECT_TRUE(needs_host_staging(gloo));
  StagingCase carried = gloo;
  carried.carried_on_device = true;  // shm, a call its device path takes
  EXPECT_FALSE(needs_host_staging(carried));
  StagingCase nccl = gloo;
  nccl.backend_takes_cuda = true;
  EXPECT_FALSE(needs_host_staging(nccl));
  StagingCase host_tensor;
  EXPECT_FALSE(needs_host_staging(host_tensor));
  StagingCase asked = carried;
  asked.asked = true;
  EXPECT_TRUE(needs_host_staging(asked));

  // Comm counts the calls it stages: every one when asked to, on rank threads over shm.
  std::vector<uint64_t> staged(2);
  test::run_on_ranks(
      2,
      [&](RankContext& ctx) {
        torch::Tensor t = torch::ones({5});
        ctx.comm->all_reduce(t);
        torch::Tensor out = torch::empty({10}), in = torch::ones({5});
        ctx.comm->all_gather_into(out, in);
        staged[ctx.rank] = ctx.comm->host_staged_calls();
        EXPECT_TRUE(torch::equal(t, torch::full({5}, 2.0f)));
      },
      /*emulate_flat_collectives=*/false, /*stage_through_host=*/true, "shm");
  EXPECT_EQ(staged, (std::vector<uint64_t>{2, 2}));
}

}  // namespace
}  // namespace shardscope
