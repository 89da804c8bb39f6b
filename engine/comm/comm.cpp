#include "engine/comm/comm.h"

#include "engine/comm/shm/process_group_shm.h"
#include "engine/launch/backward_thread.h"
#include "engine/launch/device_turns.h"

#include <algorithm>
#include <stdexcept>

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "profiling/record/clock.h"

namespace shardscope {
namespace {

using profiling::now_ns;

std::string_view dtype_name(const at::Tensor& t) {
  return t.defined() ? std::string_view(c10::toString(t.scalar_type())) : std::string_view();
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("Comm: " + message);
}

void require_same_layout(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  require(a.scalar_type() == b.scalar_type(), what + ": dtypes differ");
  require(a.sizes() == b.sizes(), what + ": shapes differ");
}

// Row views of `flat` as `size` tensors shaped like `like`; gloo writes through them.
std::vector<at::Tensor> split_rows(at::Tensor& flat, const at::Tensor& like, int size) {
  auto rows = flat.view({size, like.numel()});
  std::vector<at::Tensor> out;
  for (int r = 0; r < size; ++r) out.push_back(rows[r].view(like.sizes()));
  return out;
}

}  // namespace

void RetiredWork::keep(c10::intrusive_ptr<c10d::Work> work) {
  works_.push_back(std::move(work));
  sweep();
}

void RetiredWork::sweep() {
  works_.erase(std::remove_if(works_.begin(), works_.end(),
                              [](const c10::intrusive_ptr<c10d::Work>& w) {
                                return w.use_count() == 1;  // released here, on this thread
                              }),
               works_.end());
}

CommWork::CommWork(c10::intrusive_ptr<c10d::Work> work, profiling::RankEventLog* log, size_t event,
                   std::shared_ptr<RetiredWork> retired, std::function<void()> finish)
    : work_(std::move(work)),
      log_(log),
      event_(event),
      retired_(std::move(retired)),
      finish_(std::move(finish)) {}

void CommWork::wait() {
  if (log_ != nullptr) log_->stamp_wait_begin(event_, now_ns());
  if (work_.defined() && work_->isCompleted()) {
    // Done already: giving the device up would only queue this rank behind its peers' compute.
    work_->wait();  // rethrows the work's error, if it failed
  } else {
    // A rank waiting for its peers does not compute: with serialised compute it lets another
    // rank have the device meanwhile, and has it back before its wait is over.
    DeviceTurns::Release give_up_the_device;
    if (work_.defined()) work_->wait();
  }
  if (work_.defined() && retired_) {
    // Done with it: the buffers it references go now (or, if a backend thread still holds it,
    // at the next call), not whenever this handle is dropped. A ring that waits for a block
    // and computes on would otherwise keep every block it sent alive until its next call.
    retired_->keep(std::move(work_));
    work_.reset();
    retired_->sweep();
  }
  if (finish_) finish_();
  if (log_ != nullptr) {
    int64_t t = now_ns();
    log_->stamp_complete(event_, t);
    log_->stamp_wait_end(event_, t);
  }
}

c10::intrusive_ptr<c10::ivalue::Future> CommWork::future(
    const std::vector<at::Tensor>& result) const {
  if (work_.defined() && finish_) {
    // The chained work sees the result once it is back where the caller keeps it.
    return work_->getFuture()->then(
        [finish = finish_, result](c10::ivalue::Future&) {
          finish();
          return c10::IValue(result);
        },
        c10::ListType::ofTensors());
  }
  if (work_.defined()) return work_->getFuture();
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  future->markCompleted(c10::IValue(result));
  return future;
}

void Comm::set_timeout(std::chrono::milliseconds timeout) {
  try {
    group_->setTimeout(timeout);
  } catch (const c10::Error&) {
    // NCCL keeps the timeout it was created with.
  }
}

Comm::Comm(c10::intrusive_ptr<c10d::ProcessGroup> group, profiling::RankEventLog* log,
           Options options)
    : group_(std::move(group)),
      log_(log),
      options_(std::move(options)),
      rank_(group_->getRank()),
      size_(group_->getSize()),
      host_only_backend_(group_->getDefaultBackend()->getBackendName() != "nccl"),
      shm_(dynamic_cast<const shm::ProcessGroupShm*>(group_->getDefaultBackend().get())),
      send_seq_(size_, 0),
      recv_seq_(size_, 0) {}

int Comm::world_rank(int group_rank) const {
  return options_.world_ranks.empty() ? group_rank : options_.world_ranks.at(group_rank);
}

size_t Comm::record(std::string_view op, const at::Tensor& tensor, bool async, int peer,
                    bool emulated, bool collective, int64_t bytes) {
  retired_->sweep();
  profiling::CommCall event;
  event.op = op;
  event.group = options_.group_name;
  event.dtype = dtype_name(tensor);
  event.bytes = tensor.defined() ? static_cast<int64_t>(tensor.numel()) * tensor.element_size() : 0;
  event.group_size = size_;
  event.peer = peer < 0 ? peer : world_rank(peer);
  if (bytes >= 0) event.bytes = bytes;
  event.seq = collective ? collective_seq_++ : (op == "send" ? send_seq_ : recv_seq_).at(peer)++;
  event.async = async;
  event.emulated = emulated;
  event.t_issue_ns = now_ns();
  return log_ != nullptr ? log_->append(event) : 0;
}

HostStaging Comm::staging(const at::Tensor& t, bool carried_on_device) {
  StagingCase c;
  c.asked = options_.stage_through_host;
  c.cuda_tensor = t.defined() && t.is_cuda();
  c.backend_takes_cuda = !host_only_backend_;
  c.carried_on_device = carried_on_device;
  const bool stage = needs_host_staging(c);
  if (stage) host_staged_calls_.fetch_add(1);
  return HostStaging(stage);
}

HostStaging Comm::device_staging(const at::Tensor& output, const at::Tensor& input) {
  // Emulated flat collectives go through the list forms, which are staged as every other call.
  return staging(input, shm_ != nullptr && !options_.emulate_flat_collectives &&
                            shm_->carries_on_device(output, input));
}

CommWork Comm::track(c10::intrusive_ptr<c10d::Work> work, size_t event, HostStaging& staging) {
  note_hook_on_this_thread();  // issued inside a backward that runs on a second thread
  if (log_ != nullptr) {
    // Not every backend work exposes a future (gloo's point-to-point work does not); then
    // completion is stamped when the caller waits.
    try {
      auto* log = log_;
      work->getFuture()->addCallback(
          [log, event](c10::ivalue::Future&) { log->stamp_complete(event, now_ns()); });
    } catch (const c10::Error&) {
    }
  }
  return CommWork(std::move(work), log_, event, retired_, staging.finish());
}

CommWork Comm::completed(size_t event) {
  if (log_ != nullptr) log_->stamp_complete(event, now_ns());
  return CommWork({}, log_, event);
}

CommWork Comm::all_reduce_async(at::Tensor& tensor, c10d::ReduceOp op) {
  size_t event = record("all_reduce", tensor, true, -1, false, true);
  if (tensor.numel() == 0) return completed(event);
  HostStaging stage = device_staging(tensor, tensor);
  std::vector<at::Tensor> tensors{stage.in_out(tensor)};
  c10d::AllreduceOptions opts;
  opts.reduceOp = op;
  return track(group_->allreduce(tensors, opts), event, stage);
}

void Comm::all_reduce(at::Tensor& tensor, c10d::ReduceOp op) {
  blocking(all_reduce_async(tensor, op));
}

CommWork Comm::broadcast_async(at::Tensor& tensor, int root) {
  require(root >= 0 && root < size_, "broadcast root out of range");
  size_t event = record("broadcast", tensor, true, root, false, true);
  if (tensor.numel() == 0) return completed(event);
  HostStaging stage = staging(tensor);
  std::vector<at::Tensor> tensors{stage.in_out(tensor)};
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  return track(group_->broadcast(tensors, opts), event, stage);
}

void Comm::broadcast(at::Tensor& tensor, int root) {
  blocking(broadcast_async(tensor, root));
}

CommWork Comm::all_gather_async(std::vector<at::Tensor>& outputs, const at::Tensor& input) {
  require(static_cast<int>(outputs.size()) == size_, "all_gather needs one output per rank");
  for (const auto& out : outputs) require_same_layout(out, input, "all_gather");
  size_t event = record("all_gather", input, true, -1, false, true);
  if (input.numel() == 0) return completed(event);
  HostStaging stage = staging(input);
  std::vector<std::vector<at::Tensor>> out_lists{stage.out(outputs)};
  std::vector<at::Tensor> in{stage.in(input)};
  return track(group_->allgather(out_lists, in), event, stage);
}

void Comm::all_gather(std::vector<at::Tensor>& outputs, const at::Tensor& input) {
  blocking(all_gather_async(outputs, input));
}

CommWork Comm::all_gather_into_async(at::Tensor& output, const at::Tensor& input) {
  require(output.scalar_type() == input.scalar_type(), "all_gather_into: dtypes differ");
  require(output.numel() == input.numel() * size_,
          "all_gather_into: output must hold world_size x input elements");
  require(output.is_contiguous() && input.is_contiguous(),
          "all_gather_into: needs contiguous tensors");
  bool emulate = options_.emulate_flat_collectives;
  size_t event = record("all_gather_into", input, true, -1, emulate, true);
  if (input.numel() == 0) return completed(event);
  HostStaging stage = device_staging(output, input);
  at::Tensor out = stage.out(output);
  at::Tensor in = stage.in(input);
  if (emulate) {
    std::vector<std::vector<at::Tensor>> out_lists{split_rows(out, in, size_)};
    std::vector<at::Tensor> ins{in};
    group_->allgather(out_lists, ins)->wait();
    if (auto finish = stage.finish()) finish();
    return completed(event);
  }
  return track(group_->_allgather_base(out, in), event, stage);
}

void Comm::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  blocking(all_gather_into_async(output, input));
}

CommWork Comm::reduce_scatter_async(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                    c10d::ReduceOp op) {
  require(static_cast<int>(inputs.size()) == size_, "reduce_scatter needs one input per rank");
  for (const auto& in : inputs) require_same_layout(in, output, "reduce_scatter");
  size_t event = record("reduce_scatter", output, true, -1, false, true,
                        static_cast<int64_t>(output.numel()) * output.element_size() * size_);
  if (output.numel() == 0) return completed(event);
  HostStaging stage = staging(output);
  std::vector<at::Tensor> outs{stage.out(output)};
  std::vector<std::vector<at::Tensor>> in_lists{stage.in(inputs)};
  c10d::ReduceScatterOptions opts;
  opts.reduceOp = op;
  return track(group_->reduce_scatter(outs, in_lists, opts), event, stage);
}

void Comm::reduce_scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, c10d::ReduceOp op) {
  blocking(reduce_scatter_async(output, inputs, op));
}

CommWork Comm::reduce_scatter_tensor_async(at::Tensor& output, const at::Tensor& input,
                                           c10d::ReduceOp op) {
  require(output.scalar_type() == input.scalar_type(), "reduce_scatter_tensor: dtypes differ");
  require(input.numel() == output.numel() * size_,
          "reduce_scatter_tensor: input must hold world_size x output elements");
  require(output.is_contiguous() && input.is_contiguous(),
          "reduce_scatter_tensor: needs contiguous tensors");
  bool emulate = options_.emulate_flat_collectives;
  size_t event = record("reduce_scatter_tensor", input, true, -1, emulate, true);
  if (input.numel() == 0) return completed(event);
  HostStaging stage = device_staging(output, input);
  if (emulate) {
    // All-reduce the whole input and keep this rank's chunk: twice the traffic of a true
    // reduce-scatter, which is why it is marked emulated.
    std::vector<at::Tensor> tensors{stage.active() ? stage.in(input) : input.clone()};
    c10d::AllreduceOptions opts;
    opts.reduceOp = op;
    group_->allreduce(tensors, opts)->wait();
    output.copy_(tensors[0].view({size_, output.numel()})[rank_].view(output.sizes()));
    return completed(event);
  }
  at::Tensor out = stage.out(output);
  at::Tensor in = stage.in(input);
  c10d::ReduceScatterOptions opts;
  opts.reduceOp = op;
  return track(group_->_reduce_scatter_base(out, in, opts), event, stage);
}

void Comm::reduce_scatter_tensor(at::Tensor& output, const at::Tensor& input, c10d::ReduceOp op) {
  blocking(reduce_scatter_tensor_async(output, input, op));
}

CommWork Comm::reduce_async(at::Tensor& tensor, int root, c10d::ReduceOp op) {
  require(root >= 0 && root < size_, "reduce root out of range");
  size_t event = record("reduce", tensor, true, root, false, true);
  if (tensor.numel() == 0) return completed(event);
  HostStaging stage = staging(tensor);
  std::vector<at::Tensor> tensors{stage.in_out(tensor)};
  c10d::ReduceOptions opts;
  opts.reduceOp = op;
  opts.rootRank = root;
  return track(group_->reduce(tensors, opts), event, stage);
}

void Comm::reduce(at::Tensor& tensor, int root, c10d::ReduceOp op) {
  blocking(reduce_async(tensor, root, op));
}

CommWork Comm::gather_async(std::vector<at::Tensor>& outputs, const at::Tensor& input, int root) {
  require(root >= 0 && root < size_, "gather root out of range");
  require(static_cast<int>(outputs.size()) == (rank_ == root ? size_ : 0),
          "gather needs one output per rank on the root and none elsewhere");
  for (const auto& out : outputs) require_same_layout(out, input, "gather");
  size_t event = record("gather", input, true, root, false, true);
  if (input.numel() == 0) return completed(event);
  HostStaging stage = staging(input);
  std::vector<std::vector<at::Tensor>> out_lists;
  if (rank_ == root) out_lists.push_back(stage.out(outputs));
  std::vector<at::Tensor> in{stage.in(input)};
  c10d::GatherOptions opts;
  opts.rootRank = root;
  return track(group_->gather(out_lists, in, opts), event, stage);
}

void Comm::gather(std::vector<at::Tensor>& outputs, const at::Tensor& input, int root) {
  blocking(gather_async(outputs, input, root));
}

CommWork Comm::scatter_async(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) {
  require(root >= 0 && root < size_, "scatter root out of range");
  require(static_cast<int>(inputs.size()) == (rank_ == root ? size_ : 0),
          "scatter needs one input per rank on the root and none elsewhere");
  for (const auto& in : inputs) require_same_layout(in, output, "scatter");
  size_t event = record("scatter", output, true, root, false, true);
  if (output.numel() == 0) return completed(event);
  HostStaging stage = staging(output);
  std::vector<at::Tensor> outs{stage.out(output)};
  std::vector<std::vector<at::Tensor>> in_lists;
  if (rank_ == root) in_lists.push_back(stage.in(inputs));
  c10d::ScatterOptions opts;
  opts.rootRank = root;
  return track(group_->scatter(outs, in_lists, opts), event, stage);
}

void Comm::scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) {
  blocking(scatter_async(output, inputs, root));
}

CommWork Comm::all_to_all_async(at::Tensor& output, const at::Tensor& input) {
  require_same_layout(output, input, "all_to_all");
  require(input.dim() >= 1 && input.size(0) % size_ == 0,
          "all_to_all: dim 0 must divide evenly over the ranks");
  size_t event = record("all_to_all", input, true, -1, false, true);
  if (input.numel() == 0) return completed(event);
  HostStaging stage = staging(input);
  at::Tensor out = stage.out(output);
  at::Tensor in = stage.in(input);
  std::vector<int64_t> equal_splits;
  return track(group_->alltoall_base(out, in, equal_splits, equal_splits), event, stage);
}

void Comm::all_to_all(at::Tensor& output, const at::Tensor& input) {
  blocking(all_to_all_async(output, input));
}

CommWork Comm::all_to_all_async(at::Tensor& output, const at::Tensor& input,
                                const std::vector<int64_t>& output_rows,
                                const std::vector<int64_t>& input_rows) {
  require(output.scalar_type() == input.scalar_type(), "all_to_all: dtypes differ");
  require(input.dim() >= 1 && output.dim() == input.dim() &&
              output.sizes().slice(1) == input.sizes().slice(1),
          "all_to_all: rows of different shapes");
  auto check_rows = [&](const std::vector<int64_t>& rows, const at::Tensor& t, const char* what) {
    int64_t total = 0;
    for (int64_t r : rows) {
      require(r >= 0, std::string("all_to_all: negative ") + what + " rows");
      total += r;
    }
    require(static_cast<int>(rows.size()) == size_ && total == t.size(0),
            std::string("all_to_all: ") + what + " rows must be one count per rank summing to " +
                "its tensor's rows");
  };
  check_rows(input_rows, input, "input");
  check_rows(output_rows, output, "output");
  size_t event = record("all_to_all", input, true, -1, false, true);
  HostStaging stage = staging(input);
  at::Tensor out = stage.out(output);
  at::Tensor in = stage.in(input);
  // alltoall_base takes its split lists by non-const reference.
  std::vector<int64_t> out_splits = output_rows, in_splits = input_rows;
  return track(group_->alltoall_base(out, in, out_splits, in_splits), event, stage);
}

void Comm::all_to_all(at::Tensor& output, const at::Tensor& input,
                      const std::vector<int64_t>& output_rows,
                      const std::vector<int64_t>& input_rows) {
  blocking(all_to_all_async(output, input, output_rows, input_rows));
}

CommWork Comm::send_async(const at::Tensor& tensor, int dst, int tag) {
  require(dst >= 0 && dst < size_ && dst != rank_, "send: bad destination rank");
  size_t event = record("send", tensor, true, dst, false, false);
  if (tensor.numel() == 0) return completed(event);
  HostStaging stage = staging(tensor);
  std::vector<at::Tensor> tensors{stage.in(tensor)};
  return track(group_->send(tensors, dst, tag), event, stage);
}

void Comm::send(const at::Tensor& tensor, int dst, int tag) {
  blocking(send_async(tensor, dst, tag));
}

CommWork Comm::recv_async(at::Tensor& tensor, int src, int tag) {
  require(src >= 0 && src < size_ && src != rank_, "recv: bad source rank");
  size_t event = record("recv", tensor, true, src, false, false);
  if (tensor.numel() == 0) return completed(event);
  HostStaging stage = staging(tensor);
  std::vector<at::Tensor> tensors{stage.out(tensor)};
  return track(group_->recv(tensors, src, tag), event, stage);
}

void Comm::recv(at::Tensor& tensor, int src, int tag) {
  blocking(recv_async(tensor, src, tag));
}

void Comm::barrier() {
  size_t event = record("barrier", at::Tensor(), false, -1, false, true);
  // Not ProcessGroup::barrier: it keeps its placeholder tensor in a function-local static that
  // every call assigns, so rank threads of one process calling it together free the same
  // tensor twice (ASan: double free; without it, a corrupt heap found at thread exit). The
  // backend's own barrier takes no tensor.
  CommWork(group_->getDefaultBackend()->barrier(c10d::BarrierOptions{}), log_, event).wait();
}

void Comm::blocking(CommWork work) {
  work.wait();
  if (log_ != nullptr) log_->mark_blocking(work.event());
}

}  // namespace shardscope
