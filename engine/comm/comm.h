#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "engine/comm/host_staging.h"
#include "profiling/record/rank_event_log.h"

namespace shardscope {

namespace shm {
class ProcessGroupShm;
}

// A pending communication call. wait() blocks until the backend is done and records when the
// caller stopped waiting, so exposed communication can be measured later.
// Finished backend work a rank still holds so that the buffers it references are released on
// the rank's own thread. A backend thread that dropped the last reference would free them where
// no rank's allocation tracking can see it, and that rank's memory would seem to grow.
class RetiredWork {
 public:
  void keep(c10::intrusive_ptr<c10d::Work> work);
  // Lets go of the work no backend thread references any more (on the calling rank thread).
  void sweep();

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

class CommWork {
 public:
  CommWork() = default;
  // `finish` (if any) runs once the backend's work is done, before wait() returns: what a
  // staged call copies back from the host (engine/comm/host_staging.h).
  CommWork(c10::intrusive_ptr<c10d::Work> work, profiling::RankEventLog* log, size_t event,
           std::shared_ptr<RetiredWork> retired = nullptr, std::function<void()> finish = {});

  void wait();
  size_t event() const { return event_; }
  // The backend's future (for hooks that chain work); completed immediately for emulated ops.
  c10::intrusive_ptr<c10::ivalue::Future> future(const std::vector<at::Tensor>& result) const;

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  profiling::RankEventLog* log_ = nullptr;
  size_t event_ = 0;
  std::shared_ptr<RetiredWork> retired_;
  std::function<void()> finish_;
};

// The traced facade over a c10d process group: every collective and point-to-point call of a
// rank goes through here and is recorded in the rank's event log with its logical op, bytes and
// a per-group sequence number. Ops the backend lacks are built from others and still recorded as
// the logical op (marked emulated).
class Comm {
 public:
  struct Options {
    std::string group_name = "world";
    // Build all_gather_into / reduce_scatter_tensor from list collectives even when the backend
    // has them, so the fallback path is exercised (tests) or used on backends that lack them.
    bool emulate_flat_collectives = false;
    // The group's members as world ranks, in group order (empty: the group is the world). Peers
    // and roots are given in group ranks and recorded as world ranks, so a trace can link a send
    // to its receive whatever sub-group carried it.
    std::vector<int> world_ranks;
    // Pass every call's tensors through host copies, as a CUDA tensor on a Gloo group always
    // is (engine/comm/host_staging.h); on for tests, so the CPU exercises that path.
    bool stage_through_host = false;
  };

  Comm(c10::intrusive_ptr<c10d::ProcessGroup> group, profiling::RankEventLog* log, Options options);

  int rank() const { return rank_; }
  // Calls whose tensors went through host copies (HostStaging) so far: tests check that shm's
  // device path gets its CUDA tensors as they are.
  uint64_t host_staged_calls() const { return host_staged_calls_.load(); }
  int size() const { return size_; }
  const std::string& group_name() const { return options_.group_name; }
  // World rank of group rank `group_rank`.
  int world_rank(int group_rank) const;
  const c10::intrusive_ptr<c10d::ProcessGroup>& process_group() const { return group_; }
  // How long a collective of this group may wait from now on (Gloo; a backend that cannot change
  // it keeps its own).
  void set_timeout(std::chrono::milliseconds timeout);

  // In place on `tensor`.
  CommWork all_reduce_async(at::Tensor& tensor, c10d::ReduceOp op = c10d::ReduceOp::SUM);
  void all_reduce(at::Tensor& tensor, c10d::ReduceOp op = c10d::ReduceOp::SUM);

  CommWork broadcast_async(at::Tensor& tensor, int root);
  void broadcast(at::Tensor& tensor, int root);

  // `outputs` has size() tensors shaped like `input`.
  CommWork all_gather_async(std::vector<at::Tensor>& outputs, const at::Tensor& input);
  void all_gather(std::vector<at::Tensor>& outputs, const at::Tensor& input);

  // `output` is size() times `input` along dim 0 (flat concatenation in rank order).
  CommWork all_gather_into_async(at::Tensor& output, const at::Tensor& input);
  void all_gather_into(at::Tensor& output, const at::Tensor& input);

  // `inputs` has size() tensors shaped like `output`; rank r receives the reduction of inputs[r].
  CommWork reduce_scatter_async(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                c10d::ReduceOp op = c10d::ReduceOp::SUM);
  void reduce_scatter(at::Tensor& output, std::vector<at::Tensor>& inputs,
                      c10d::ReduceOp op = c10d::ReduceOp::SUM);

  // `input` is size() times `output` along dim 0; rank r receives the reduction of its chunk.
  CommWork reduce_scatter_tensor_async(at::Tensor& output, const at::Tensor& input,
                                       c10d::ReduceOp op = c10d::ReduceOp::SUM);
  void reduce_scatter_tensor(at::Tensor& output, const at::Tensor& input,
                             c10d::ReduceOp op = c10d::ReduceOp::SUM);

  // `tensor` on `root` receives the reduction; other ranks' tensors are left unspecified.
  CommWork reduce_async(at::Tensor& tensor, int root, c10d::ReduceOp op = c10d::ReduceOp::SUM);
  void reduce(at::Tensor& tensor, int root, c10d::ReduceOp op = c10d::ReduceOp::SUM);

  // On `root`, `outputs` has size() tensors shaped like `input`; elsewhere it is empty.
  CommWork gather_async(std::vector<at::Tensor>& outputs, const at::Tensor& input, int root);
  void gather(std::vector<at::Tensor>& outputs, const at::Tensor& input, int root);

  // On `root`, `inputs` has size() tensors shaped like `output`; elsewhere it is empty.
  CommWork scatter_async(at::Tensor& output, std::vector<at::Tensor>& inputs, int root);
  void scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root);

  // Equal split along dim 0: chunk j of this rank's input goes to rank j, and chunk i of the
  // output comes from rank i.
  CommWork all_to_all_async(at::Tensor& output, const at::Tensor& input);
  void all_to_all(at::Tensor& output, const at::Tensor& input);
  // Uneven split along dim 0 (what expert parallelism's dispatch needs): the next
  // input_rows[j] rows of `input` go to rank j, and output_rows[i] rows from rank i fill
  // `output` in rank order. Each list has size() counts summing to its tensor's rows; a rank
  // joins even with nothing to send or receive.
  CommWork all_to_all_async(at::Tensor& output, const at::Tensor& input,
                            const std::vector<int64_t>& output_rows,
                            const std::vector<int64_t>& input_rows);
  void all_to_all(at::Tensor& output, const at::Tensor& input,
                  const std::vector<int64_t>& output_rows, const std::vector<int64_t>& input_rows);

  CommWork send_async(const at::Tensor& tensor, int dst, int tag = 0);
  void send(const at::Tensor& tensor, int dst, int tag = 0);
  CommWork recv_async(at::Tensor& tensor, int src, int tag = 0);
  void recv(at::Tensor& tensor, int src, int tag = 0);

  void barrier();

  profiling::RankEventLog* log() const { return log_; }

 private:
  // `bytes` < 0: the bytes of `tensor`. Point-to-point calls (collective = false) are numbered
  // per direction and peer, so send k from r to d and receive k at d from r share a number.
  size_t record(std::string_view op, const at::Tensor& tensor, bool async, int peer, bool emulated,
                bool collective, int64_t bytes = -1);
  CommWork track(c10::intrusive_ptr<c10d::Work> work, size_t event, HostStaging& staging);
  // How this call's tensors reach the backend (needs_host_staging), counted in
  // host_staged_calls: through the host when the backend reads only host memory and `t` is on a
  // device, unless the backend carries the call on the device (or when the options ask for it).
  HostStaging staging(const at::Tensor& t, bool carried_on_device = false);
  // The same for the calls shm's device path can carry (all_reduce: output and input are one).
  HostStaging device_staging(const at::Tensor& output, const at::Tensor& input);
  // An op done synchronously (emulation or empty payload) presented as completed async work.
  CommWork completed(size_t event);
  // The blocking variants: wait at once and record the call as synchronous.
  void blocking(CommWork work);

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  profiling::RankEventLog* log_;
  std::shared_ptr<RetiredWork> retired_ = std::make_shared<RetiredWork>();
  Options options_;
  int rank_;
  int size_;
  bool host_only_backend_;  // Gloo or shm: CUDA tensors are staged, unless shm carries the call
  const shm::ProcessGroupShm* shm_;             // the group's backend when it is shm, else null
  std::atomic<uint64_t> host_staged_calls_{0};  // a backward thread issues calls too
  uint64_t collective_seq_ = 0;
  std::vector<uint64_t> send_seq_;  // per destination
  std::vector<uint64_t> recv_seq_;  // per source
};

}  // namespace shardscope
