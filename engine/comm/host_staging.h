#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace shardscope {

// Gloo moves bytes between host buffers over TCP. Some of its ops (send, recv, the flat
// reduce-scatter and all-gather) hand a tensor's pointer straight to the socket, so a CUDA
// tensor fails there ("writev: Bad address") or its peer waits until it times out. When ranks
// share a GPU over Gloo, a call's CUDA tensors therefore go through host copies: each input is
// copied to the host before the call, and each output is copied back when the call completes.
// These copies are an artefact of simulating N GPUs over Gloo (NCCL on N GPUs has none), so
// they stay out of the rank's memory accounting.
//
// Whether a call's tensors go through host copies: when the options ask for it (tests), or for
// a CUDA tensor on a backend that moves host buffers only (Gloo), or on shm, except where its
// device path carries the call (engine/comm/shm/device_collectives.h: all_reduce, all_gather_into
// and reduce_scatter_tensor of contiguous CUDA tensors of ranks sharing a device), which reads
// and writes the tensors where they are: staged through pageable host memory, they cost a rank
// 8-9 ms a 12 MB bucket inside its turn on a shared H100 (docs/gpu-leases.md). shm's other calls
// are staged here as before: shm would stage CUDA tensors through pinned memory itself, but that
// path has not run on a GPU.
struct StagingCase {
  bool asked = false;               // Comm's stage_through_host
  bool cuda_tensor = false;         // the call's tensor is on a CUDA device
  bool backend_takes_cuda = false;  // NCCL
  bool carried_on_device = false;   // shm's device path takes this call's tensors
};
bool needs_host_staging(const StagingCase& c);

// One HostStaging serves one call: pass each tensor through in() / out() / in_out(), give the
// backend what they return, and run finish() once the backend's work is done.
class HostStaging {
 public:
  explicit HostStaging(bool active) : active_(active) {}

  bool active() const { return active_; }
  // What the backend reads: a host copy of `t` when staging, else `t`.
  at::Tensor in(const at::Tensor& t);
  // What the backend writes: a host tensor shaped like `t` that finish() copies into `t`.
  at::Tensor out(const at::Tensor& t);
  // Both (in-place ops: all-reduce, broadcast, reduce, a receive into a buffer).
  at::Tensor in_out(const at::Tensor& t);
  std::vector<at::Tensor> out(const std::vector<at::Tensor>& ts);
  std::vector<at::Tensor> in(const std::vector<at::Tensor>& ts);

  // Copies every output back into its tensor, once, however often it is called (the caller's
  // wait and a future's callback may both reach it). Empty when nothing is staged.
  std::function<void()> finish();

 private:
  at::Tensor host_copy(const at::Tensor& t, bool with_contents);

  bool active_;
  // (the caller's tensor, its host stand-in)
  std::vector<std::pair<at::Tensor, at::Tensor>> outputs_;
};

}  // namespace shardscope
