#include "engine/comm/shm/process_group_shm.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>

#include "engine/comm/shm/device_collectives.h"
#include "engine/comm/shm/shm_path.h"

namespace shardscope::shm {

namespace {

// A tensor as the segment needs it: host memory, contiguous. A CUDA or strided tensor is copied
// there first and back after (its contents included: a reduction reads what it holds); a CUDA
// tensor into pinned memory, which the device copies at its full rate. (all_reduce, all_gather
// and reduce_scatter of contiguous CUDA tensors stay on the device: device_collectives.h.)
//
// The copies a collective staged are listed while it runs (on the worker thread): should it
// fail, peers working in place may still write into them, so they are kept until the group goes.
thread_local std::vector<at::Tensor>* staged_by_this_collective = nullptr;

struct HostCopy {
  at::Tensor original;
  at::Tensor host;

  explicit HostCopy(const at::Tensor& t) : original(t), host(staged(t)) {
    if (staged_by_this_collective != nullptr && host.data_ptr() != original.data_ptr())
      staged_by_this_collective->push_back(host);
  }
  void write_back() const {
    if (host.data_ptr() != original.data_ptr()) original.copy_(host);
  }

  static at::Tensor staged(const at::Tensor& t) {
    if (t.is_cpu()) return t.is_contiguous() ? t : t.contiguous();
    at::Tensor pinned = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
    pinned.copy_(t);
    return pinned;
  }
};

std::vector<HostCopy> host_copies(const std::vector<at::Tensor>& tensors) {
  return std::vector<HostCopy>(tensors.begin(), tensors.end());
}

std::vector<at::Tensor> hosts(const std::vector<HostCopy>& copies) {
  std::vector<at::Tensor> out;
  for (const auto& c : copies) out.push_back(c.host);
  return out;
}

void write_back(const std::vector<HostCopy>& copies) {
  for (const auto& c : copies) c.write_back();
}

// The Work holds every tensor the operation touches until the caller lets go of it: the last
// reference then drops on the caller's thread, never on the worker's or the courier's, where
// the rank's memory tracking would not see the free.
class ShmWork final : public c10d::Work {
 public:
  ShmWork(c10::intrusive_ptr<c10::ivalue::Future> future, c10d::OpType type,
          std::vector<at::Tensor> keep)
      : Work(-1, type), future_(std::move(future)), keep_(std::move(keep)) {}

  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override {
    return future_->hasError() ? future_->exception_ptr() : nullptr;
  }
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return true;
  }
  std::vector<at::Tensor> result() override { return future_->value().toTensorVector(); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::vector<at::Tensor> keep_;
};

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

void require_single(const std::vector<at::Tensor>& tensors, const char* what) {
  if (tensors.size() != 1)
    throw std::invalid_argument(std::string("shm ") + what + " takes exactly one tensor");
}

// The segment of the group: rank 0 creates it and says where in the store; the others open it
// through /proc, after checking that they run on the same host (boot id).
std::unique_ptr<Segment> join_segment(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                      const Layout& layout) {
  const std::string key = "shm/segment";
  if (rank == 0) {
    const int fd = Segment::create_memfd(layout.total_bytes());
    auto segment = std::make_unique<Segment>(layout, fd, /*create=*/true);
    std::ostringstream where;
    where << boot_id() << " " << getpid() << " " << fd << " " << layout.total_bytes();
    store->set(key, where.str());
    return segment;
  }
  const std::vector<uint8_t> value = store->get(key);
  std::istringstream where(std::string(value.begin(), value.end()));
  std::string boot;
  long pid = 0, fd = 0;
  size_t bytes = 0;
  where >> boot >> pid >> fd >> bytes;
  if (boot != boot_id()) {
    throw std::invalid_argument(
        "backend shm: rank 0 runs on another host; shared memory joins ranks of one host only "
        "(use --backend gloo across hosts)");
  }
  if (bytes != layout.total_bytes())
    throw std::invalid_argument("backend shm: rank 0 sized the segment differently");
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int opened = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (opened < 0) {
    throw std::runtime_error("backend shm: cannot open rank 0's segment " + path + ": " +
                             std::strerror(errno));
  }
  struct stat about {};
  if (fstat(opened, &about) != 0 || static_cast<size_t>(about.st_size) != bytes) {
    close(opened);
    throw std::runtime_error("backend shm: " + path + " is not rank 0's segment any more");
  }
  return std::make_unique<Segment>(layout, opened, /*create=*/false);
}

// What this group's choice of path rests on (shm_path.h).
PathFacts path_facts(const Segment& segment) {
  PathFacts facts;
  facts.world = segment.layout().world;
  facts.same_process = true;
  for (int r = 0; r < facts.world; ++r)
    facts.same_process = facts.same_process && segment.rank_area(r).pid.load() == getpid();
  if (const char* forced = std::getenv("SHARDSCOPE_SHM_PATH")) facts.forced = forced;
  facts.cores = sysconf(_SC_NPROCESSORS_ONLN);
  return facts;
}

// Every rank forces the same path, or none: ranks that chose differently would pair one's probe
// barriers with another's collectives. All ranks see a difference alike, so all refuse.
void require_same_forced_path(const Segment& segment, int rank, Collectives& collectives,
                              const std::string& forced) {
  const auto wish = static_cast<uint32_t>(std::hash<std::string>{}(forced));
  segment.rank_area(rank).path_wish.store(wish, std::memory_order_release);
  collectives.barrier("agreeing on the shm path");
  for (int r = 0; r < segment.layout().world; ++r) {
    if (segment.rank_area(r).path_wish.load(std::memory_order_acquire) != wish) {
      throw std::invalid_argument("SHARDSCOPE_SHM_PATH differs between the ranks of this group " +
                                  std::string("(here: '") + forced +
                                  "'): set it alike for every rank, or for none");
    }
  }
}

}  // namespace

ProcessGroupShm::ProcessGroupShm(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 Options options)
    : Backend(rank, size) {
  if (size < 1 || size > 64)
    throw std::invalid_argument("backend shm: 1 to 64 ranks, got " + std::to_string(size));
  Layout layout;
  layout.world = size;
  layout.slot_bytes = options.slot_bytes;
  layout.ring_bytes = options.ring_bytes;
  segment_ = join_segment(store, rank, layout);
  segment_->rank_area(rank).pid.store(getpid(), std::memory_order_release);
  collectives_ = std::make_unique<Collectives>(*segment_, rank);
  collectives_->set_timeout(options.timeout);
  // Every rank has mapped the segment, and said in which process, once this barrier passes.
  collectives_->barrier("joining the shm group");
  const PathFacts facts = path_facts(*segment_);
  require_same_forced_path(*segment_, rank, *collectives_, facts.forced);
  collectives_->set_path(choose_path(facts, [this] { return collectives_->probe_peer_reads(); }));
  device_ = std::make_unique<DeviceCollectives>(*segment_, *collectives_, rank, facts.same_process);
  mailbox_ = std::make_unique<Mailbox>(*segment_, rank);
  mailbox_->set_timeout(options.timeout);
  worker_ = std::thread([this] { work_loop(); });
}

ProcessGroupShm::~ProcessGroupShm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
  mailbox_.reset();
  // Peers still waiting on this rank learn that it left, at once rather than at their timeout.
  RankArea& mine = segment_->rank_area(rank_);
  mine.gone.store(1, std::memory_order_release);
  segment_->barrier_word().fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(segment_->barrier_word());
  for (int r = 0; r < size_; ++r) ring_doorbell(segment_->rank_area(r));
}

bool ProcessGroupShm::carries_on_device(const at::Tensor& output, const at::Tensor& input) const {
  const bool threads = device_->peers_are_threads();
  return DeviceCollectives::takes(output, threads) && DeviceCollectives::takes(input, threads) &&
         output.device() == input.device() && output.scalar_type() == input.scalar_type();
}

int ProcessGroupShm::checked_root(int64_t root) const {
  if (root < 0 || root >= size_) throw std::invalid_argument("shm: root rank out of range");
  return static_cast<int>(root);
}

void ProcessGroupShm::setTimeout(std::chrono::milliseconds timeout) {
  collectives_->set_timeout(timeout);
  mailbox_->set_timeout(timeout);
}

void ProcessGroupShm::sweep_graveyard() {
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> done;
  {
    std::lock_guard<std::mutex> lock(graveyard_mutex_);
    done.swap(graveyard_);
  }
}

void ProcessGroupShm::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw std::invalid_argument(std::string("shm ") + what + ": rank " + std::to_string(peer) +
                                " is not another rank of this group of " + std::to_string(size_));
  }
}

void ProcessGroupShm::work_loop() {
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::enqueue(c10d::OpType type,
                                                        std::vector<at::Tensor> outputs,
                                                        std::vector<at::Tensor> inputs,
                                                        std::function<void()> run) {
  sweep_graveyard();
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  std::vector<at::Tensor> keep = inputs;
  keep.insert(keep.end(), outputs.begin(), outputs.end());
  Task task = [this, future, outputs, run = std::move(run)]() mutable {
    std::exception_ptr error = broken_;
    if (!error) {
      std::vector<at::Tensor> staged;
      staged_by_this_collective = &staged;
      try {
        run();
        staged_by_this_collective = nullptr;
      } catch (...) {
        staged_by_this_collective = nullptr;
        error = broken_ = std::current_exception();
        failed_.push_back(std::move(run));
        failed_staging_.insert(failed_staging_.end(), staged.begin(), staged.end());
        // Peers waiting on this rank learn at once that it will not come.
        RankArea& mine = segment_->rank_area(rank_);
        mine.gone.store(1, std::memory_order_release);
        segment_->barrier_word().fetch_add(1, std::memory_order_acq_rel);
        futex_wake_all(segment_->barrier_word());
      }
    }
    run = nullptr;  // its tensors: the Work still holds them
    if (error) {
      future->setError(error);
    } else {
      future->markCompleted(c10::IValue(std::move(outputs)));
    }
    // The future holds the outputs: its last reference must not drop here (see ShmWork).
    std::lock_guard<std::mutex> lock(graveyard_mutex_);
    graveyard_.push_back(std::move(future));
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) throw std::runtime_error("shm process group is shutting down");
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
  return c10::make_intrusive<ShmWork>(future, type, std::move(keep));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  require_single(tensors, "broadcast");
  const int root = checked_root(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, tensors, {}, [this, t = tensors[0], root] {
    HostCopy c(t);
    collectives_->broadcast(c.host, root);
    c.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  const c10d::ReduceOp op = opts.reduceOp;
  return enqueue(c10d::OpType::ALLREDUCE, tensors, {}, [this, tensors, op] {
    for (const at::Tensor& t : tensors) {
      if (DeviceCollectives::takes(t, device_->peers_are_threads())) {
        at::Tensor on_device = t;
        device_->all_reduce(on_device, op);
        continue;
      }
      HostCopy c(t);
      collectives_->all_reduce(c.host, op);
      c.write_back();
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  c10d::AllreduceOptions each;
  each.reduceOp = opts.reduceOp;
  return allreduce(tensors, each);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  require_single(tensors, "reduce");
  const int root = checked_root(opts.rootRank);
  const c10d::ReduceOp op = opts.reduceOp;
  return enqueue(c10d::OpType::REDUCE, tensors, {}, [this, t = tensors[0], root, op] {
    HostCopy c(t);
    collectives_->reduce(c.host, root, op);
    c.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  require_single(inputs, "allgather");
  if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != size_)
    throw std::invalid_argument("shm allgather: one output list of world size expected");
  return enqueue(c10d::OpType::ALLGATHER, outputs[0], inputs,
                 [this, in = inputs[0], outs = outputs[0]] {
                   HostCopy input(in);
                   std::vector<HostCopy> copies = host_copies(outs);
                   std::vector<at::Tensor> host = hosts(copies);
                   collectives_->all_gather(host, input.host);
                   write_back(copies);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  if (output.numel() != input.numel() * size_)
    throw std::invalid_argument("shm _allgather_base: output must hold world x input");
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, {input}, [this, output, input] {
    if (carries_on_device(output, input)) {
      at::Tensor out = output;
      return device_->all_gather(out, input);
    }
    HostCopy in(input), out(output);
    std::vector<at::Tensor> parts = out.host.view({-1}).chunk(size_);
    collectives_->all_gather(parts, in.host);
    out.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  require_single(inputs, "gather");
  const int root = checked_root(opts.rootRank);
  std::vector<at::Tensor> outs = outputs.empty() ? std::vector<at::Tensor>{} : outputs[0];
  return enqueue(c10d::OpType::GATHER, outs, inputs, [this, in = inputs[0], outs, root] {
    HostCopy input(in);
    std::vector<HostCopy> copies = host_copies(outs);
    std::vector<at::Tensor> host = hosts(copies);
    collectives_->gather(host, input.host, root);
    write_back(copies);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  require_single(outputs, "scatter");
  const int root = checked_root(opts.rootRank);
  std::vector<at::Tensor> ins = inputs.empty() ? std::vector<at::Tensor>{} : inputs[0];
  return enqueue(c10d::OpType::SCATTER, outputs, ins, [this, out = outputs[0], ins, root] {
    HostCopy output(out);
    std::vector<HostCopy> copies = host_copies(ins);
    collectives_->scatter(output.host, hosts(copies), root);
    output.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  require_single(outputs, "reduce_scatter");
  if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != size_)
    throw std::invalid_argument("shm reduce_scatter: one input list of world size expected");
  const c10d::ReduceOp op = opts.reduceOp;
  return enqueue(c10d::OpType::REDUCE_SCATTER, outputs, inputs[0],
                 [this, out = outputs[0], ins = inputs[0], op] {
                   HostCopy output(out);
                   std::vector<HostCopy> copies = host_copies(ins);
                   collectives_->reduce_scatter(output.host, hosts(copies), op);
                   output.write_back();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  if (input.numel() != output.numel() * size_)
    throw std::invalid_argument("shm _reduce_scatter_base: input must hold world x output");
  const c10d::ReduceOp op = opts.reduceOp;
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, {input}, [this, output, input, op] {
    if (carries_on_device(output, input)) {
      at::Tensor out = output;
      return device_->reduce_scatter(out, input, op);
    }
    HostCopy out(output), in(input);
    collectives_->reduce_scatter(out.host, in.host.view({-1}).chunk(size_), op);
    out.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& /*opts*/) {
  return enqueue(c10d::OpType::ALLTOALL_BASE, {output}, {input},
                 [this, output, input, output_splits, input_splits] {
                   HostCopy out(output), in(input);
                   collectives_->all_to_all(out.host, in.host, output_splits, input_splits);
                   out.write_back();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::send(std::vector<at::Tensor>& tensors, int dst,
                                                     int tag) {
  require_single(tensors, "send");
  check_peer(dst, "send");
  sweep_graveyard();
  HostCopy c(tensors[0]);  // a copy when the tensor is not host memory: it is sent as it is now
  return c10::make_intrusive<ShmWork>(mailbox_->send(c.host, dst, tag), c10d::OpType::SEND,
                                      std::vector<at::Tensor>{c.host, c.original});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::recv(std::vector<at::Tensor>& tensors, int src,
                                                     int tag) {
  require_single(tensors, "recv");
  check_peer(src, "recv");
  sweep_graveyard();
  HostCopy c(tensors[0]);
  auto arrived = mailbox_->recv(c.host, src, tag);
  if (c.host.data_ptr() == c.original.data_ptr())
    return c10::make_intrusive<ShmWork>(arrived, c10d::OpType::RECV,
                                        std::vector<at::Tensor>{c.host});
  auto copied = arrived->then(
      [c](c10::ivalue::Future& f) {
        f.value();  // rethrows a failed receive
        c.write_back();
        return c10::IValue(std::vector<at::Tensor>{c.original});
      },
      c10::ListType::ofTensors());
  return c10::make_intrusive<ShmWork>(copied, c10d::OpType::RECV,
                                      std::vector<at::Tensor>{c.host, c.original});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupShm::barrier(const c10d::BarrierOptions& /*opts*/) {
  return enqueue(c10d::OpType::BARRIER, {}, {}, [this] { collectives_->barrier("barrier"); });
}

}  // namespace shardscope::shm
