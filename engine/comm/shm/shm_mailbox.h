#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/Tensor.h>
#include <ATen/core/ivalue.h>

#include "engine/comm/shm/shm_segment.h"

namespace shardscope::shm {

// Point-to-point messages between the ranks of a Segment: each ordered pair has a ring of bytes
// in shared memory, carrying [tag, length, payload] frames in the order they were sent. A
// courier thread per rank moves the bytes: it writes this rank's sends into the rings as space
// frees, and reads the rings toward this rank into the receives posted for them, so a send
// completes once its bytes are in, and a receive once its message arrived, whichever of the two
// sides asked first. As over Gloo, a receive matches the oldest unreceived message from its
// source with its tag; a message whose receive is not posted yet waits in a stash.
class Mailbox {
 public:
  using FuturePtr = c10::intrusive_ptr<c10::ivalue::Future>;

  Mailbox(Segment& segment, int rank);
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ms_ = timeout.count(); }
  // `tensor`: a contiguous host tensor, left untouched until the future completes.
  FuturePtr send(const at::Tensor& tensor, int dst, int tag);
  // `tensor`: a contiguous host tensor of the message's size, filled when the future completes.
  FuturePtr recv(at::Tensor& tensor, int src, int tag);

 private:
  struct Pending {
    at::Tensor tensor;
    int64_t tag = 0;
    int64_t done = 0;     // payload bytes moved
    bool framed = false;  // send: its frame header is in the ring
    FuturePtr future;
    std::chrono::steady_clock::time_point deadline;
  };
  struct Reading {  // the frame this rank is reading from a source's ring
    bool active = false;
    int64_t tag = 0;
    int64_t bytes = 0;
    int64_t done = 0;
    Pending* into = nullptr;       // a posted receive, or
    std::vector<uint8_t> stashed;  // a message nobody asked for yet
  };
  struct Stashed {
    int64_t tag;
    std::vector<uint8_t> bytes;
  };
  using Completions = std::vector<std::pair<FuturePtr, std::exception_ptr>>;

  Pending pending(const at::Tensor& tensor, int tag) const;
  void run();
  bool progress(Completions& done);
  bool write_sends(int dst, Completions& done);
  bool read_ring(int src, Completions& done);
  void deliver(Pending& recv, const uint8_t* data, int64_t bytes, int src, Completions& done);
  bool take_from_stash(Pending& recv, int src, Completions& done);
  void fail_overdue(Completions& done);
  static FuturePtr new_future();
  static void complete(Completions& done);

  Segment& segment_;
  int rank_;
  std::atomic<int64_t> timeout_ms_{60000};  // set by the caller, read by the worker
  std::mutex mutex_;
  std::map<int, std::deque<Pending>> sends_;  // by destination
  std::map<int, std::list<Pending>> recvs_;   // by source, in posting order (a list: a receive
                                              // being filled keeps its address)
  std::map<int, Reading> reading_;            // by source
  std::map<int, std::deque<Stashed>> stash_;  // by source
  // Peers whose rings cannot be trusted any more (a frame cut short, a peer gone mid-message):
  // everything to or from them fails at once, with the first reason.
  std::map<int, std::exception_ptr> broken_;
  void break_peer(int peer, std::exception_ptr why, Completions& done);
  std::atomic<bool> stop_{false};
  std::thread courier_;
};

}  // namespace shardscope::shm
