#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "engine/comm/shm/device_collectives.h"
#include "engine/comm/shm/shm_collectives.h"
#include "engine/comm/shm/shm_mailbox.h"
#include "engine/comm/shm/shm_segment.h"

namespace shardscope::shm {

// A c10d backend for ranks on one host (`--backend shm`): collectives and point-to-point through
// a shared-memory segment instead of loopback TCP. Rank threads and rank processes alike; CUDA
// tensors are reduced and gathered on their device (device_collectives.h), and staged through
// pinned host memory for the other collectives. Collectives run in issue order on a worker thread
// of each rank, as Gloo's do, so a Work completes while its caller computes; each returns a Work
// whose future holds the output tensors (what DDP's Reducer and Comm wait on). Errors (a peer
// gone, a timeout naming the ranks awaited) complete the future with the exception.
class ProcessGroupShm final : public c10d::Backend {
 public:
  struct Options {
    std::chrono::milliseconds timeout{60000};
    size_t slot_bytes = 4u << 20;  // one rank's share of a collective round
    size_t ring_bytes = 1u << 20;  // one ordered pair's point-to-point ring
  };

  // Joins the group through `store` (rank 0 creates the segment); blocks until every rank has.
  ProcessGroupShm(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                  Options options);
  ~ProcessGroupShm() override;

  const std::string getBackendName() const override { return "shm"; }
  // Whether all_reduce (output and input one tensor), _allgather_base or _reduce_scatter_base
  // from `input` into `output` stays on their device (device_collectives.h): Comm then hands them
  // over as they are, with no host copies.
  bool carries_on_device(const at::Tensor& output, const at::Tensor& input) const;
  void setTimeout(std::chrono::milliseconds timeout) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  using Task = std::function<void()>;
  // Queues `run` on the worker; the Work completes with `outputs` once it has run.
  // `inputs` and `outputs` are held by the Work (see ShmWork).
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::vector<at::Tensor> inputs, std::function<void()> run);
  void work_loop();
  // Drops, on the calling rank's thread, the futures the worker finished with.
  void sweep_graveyard();

  std::unique_ptr<Segment> segment_;
  std::unique_ptr<Collectives> collectives_;
  std::unique_ptr<DeviceCollectives> device_;  // CUDA tensors of ranks sharing their device
  std::unique_ptr<Mailbox> mailbox_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;
  // The first collective that failed: the ranks' barriers are out of step from then on, so every
  // later one fails at once with it. Its tensors stay alive (peers working in place may still
  // write into them) until the group is destroyed.
  std::exception_ptr broken_;
  std::vector<std::function<void()>> failed_;
  std::vector<at::Tensor> failed_staging_;  // its host copies of CUDA or strided tensors
  void check_peer(int peer, const char* what) const;
  int checked_root(int64_t root) const;  // a root rank of this group, or invalid_argument
  std::mutex graveyard_mutex_;
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> graveyard_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace shardscope::shm
