#include "engine/comm/shm/shm_mailbox.h"

#include <algorithm>
#include <cstring>

#include <ATen/core/jit_type.h>

namespace shardscope::shm {

namespace {

struct Frame {
  int64_t tag;
  int64_t bytes;
};

uint8_t* bytes_of(const at::Tensor& t) {
  return static_cast<uint8_t*>(t.data_ptr());
}

int64_t nbytes(const at::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

// Copies up to `n` bytes into the ring (src -> dst) at its head; returns how many fitted.
int64_t ring_write(const Segment& segment, int src, int dst, const uint8_t* data, int64_t n) {
  RingHeader& ring = segment.ring_header(src, dst);
  const int64_t capacity = static_cast<int64_t>(segment.layout().ring_bytes);
  const uint64_t head = ring.head.load(std::memory_order_relaxed);
  const uint64_t tail = ring.tail.load(std::memory_order_acquire);
  const int64_t room = capacity - static_cast<int64_t>(head - tail);
  const int64_t count = std::min(room, n);
  if (count <= 0) return 0;
  uint8_t* base = segment.ring_data(src, dst);
  const int64_t at = static_cast<int64_t>(head % capacity);
  const int64_t first = std::min(count, capacity - at);
  std::memcpy(base + at, data, first);
  std::memcpy(base, data + first, count - first);
  ring.head.store(head + count, std::memory_order_release);
  return count;
}

// Copies up to `n` bytes out of the ring (src -> dst) at its tail, consuming them.
int64_t ring_read(const Segment& segment, int src, int dst, uint8_t* data, int64_t n) {
  RingHeader& ring = segment.ring_header(src, dst);
  const int64_t capacity = static_cast<int64_t>(segment.layout().ring_bytes);
  const uint64_t tail = ring.tail.load(std::memory_order_relaxed);
  const uint64_t head = ring.head.load(std::memory_order_acquire);
  const int64_t count = std::min(static_cast<int64_t>(head - tail), n);
  if (count <= 0) return 0;
  const uint8_t* base = segment.ring_data(src, dst);
  const int64_t at = static_cast<int64_t>(tail % capacity);
  const int64_t first = std::min(count, capacity - at);
  std::memcpy(data, base + at, first);
  std::memcpy(data + first, base, count - first);
  ring.tail.store(tail + count, std::memory_order_release);
  return count;
}

int64_t ring_room(const Segment& segment, int src, int dst) {
  const RingHeader& ring = segment.ring_header(src, dst);
  return static_cast<int64_t>(segment.layout().ring_bytes) -
         static_cast<int64_t>(ring.head.load(std::memory_order_relaxed) -
                              ring.tail.load(std::memory_order_acquire));
}

int64_t ring_filled(const Segment& segment, int src, int dst) {
  const RingHeader& ring = segment.ring_header(src, dst);
  return static_cast<int64_t>(ring.head.load(std::memory_order_acquire) -
                              ring.tail.load(std::memory_order_relaxed));
}

}  // namespace

Mailbox::FuturePtr Mailbox::new_future() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
}

void Mailbox::complete(Completions& done) {
  for (auto& [future, error] : done) {
    if (error) {
      future->setError(error);
    } else {
      future->markCompleted(c10::IValue(std::vector<at::Tensor>{}));
    }
  }
  done.clear();
}

Mailbox::Mailbox(Segment& segment, int rank)
    : segment_(segment), rank_(rank), courier_([this] { run(); }) {}

Mailbox::~Mailbox() {
  stop_ = true;
  ring_doorbell(segment_.rank_area(rank_));
  courier_.join();
  Completions done;
  const auto why = std::make_exception_ptr(PeerFailure("the process group was destroyed"));
  for (auto& [peer, queue] : sends_)
    for (auto& p : queue) done.emplace_back(p.future, why);
  for (auto& [peer, queue] : recvs_)
    for (auto& p : queue) done.emplace_back(p.future, why);
  complete(done);
}

Mailbox::Pending Mailbox::pending(const at::Tensor& tensor, int tag) const {
  Pending p;
  p.tensor = tensor;
  p.tag = tag;
  p.future = new_future();
  p.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_.load());
  return p;
}

Mailbox::FuturePtr Mailbox::send(const at::Tensor& tensor, int dst, int tag) {
  Pending p = pending(tensor, tag);
  FuturePtr future = p.future;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_.count(dst) != 0) {
      p.future->setError(broken_.at(dst));
      return future;
    }
    sends_[dst].push_back(std::move(p));
  }
  ring_doorbell(segment_.rank_area(rank_));
  return future;
}

Mailbox::FuturePtr Mailbox::recv(at::Tensor& tensor, int src, int tag) {
  Pending p = pending(tensor, tag);
  FuturePtr future = p.future;
  Completions done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (take_from_stash(p, src, done)) {
      // delivered from what had arrived already
    } else if (broken_.count(src) != 0) {
      done.emplace_back(p.future, broken_.at(src));
    } else {
      recvs_[src].push_back(std::move(p));
    }
  }
  complete(done);
  ring_doorbell(segment_.rank_area(rank_));
  return future;
}

void Mailbox::run() {
  std::atomic<uint32_t>& bell = segment_.rank_area(rank_).doorbell;
  auto next_check = std::chrono::steady_clock::now();
  while (!stop_) {
    const uint32_t seen = bell.load(std::memory_order_acquire);
    Completions done;
    bool moved = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      try {
        moved = progress(done);
        if (std::chrono::steady_clock::now() >= next_check) {
          fail_overdue(done);
          next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
        }
      } catch (...) {
        // Nothing may escape the courier (it would end the process): every peer's traffic
        // fails with the reason instead.
        const auto why = std::current_exception();
        for (int peer = 0; peer < segment_.layout().world; ++peer)
          if (peer != rank_) break_peer(peer, why, done);
      }
    }
    complete(done);
    if (!moved) futex_wait(bell, seen, std::chrono::milliseconds(50));
  }
}

bool Mailbox::progress(Completions& done) {
  bool moved = false;
  for (auto& [dst, queue] : sends_)
    if (!queue.empty() && broken_.count(dst) == 0) moved = write_sends(dst, done) || moved;
  for (int src = 0; src < segment_.layout().world; ++src) {
    if (src != rank_ && broken_.count(src) == 0 && ring_filled(segment_, src, rank_) > 0)
      moved = read_ring(src, done) || moved;
  }
  return moved;
}

void Mailbox::break_peer(int peer, std::exception_ptr why, Completions& done) {
  broken_.emplace(peer, why);
  const std::exception_ptr first = broken_.at(peer);
  for (auto& p : sends_[peer]) done.emplace_back(p.future, first);
  for (auto& p : recvs_[peer]) done.emplace_back(p.future, first);
  sends_[peer].clear();
  recvs_[peer].clear();
  reading_[peer] = Reading{};
}

bool Mailbox::write_sends(int dst, Completions& done) {
  std::deque<Pending>& queue = sends_[dst];
  bool moved = false;
  while (!queue.empty()) {
    Pending& p = queue.front();
    if (!p.framed) {
      if (ring_room(segment_, rank_, dst) < static_cast<int64_t>(sizeof(Frame))) break;
      const Frame frame{p.tag, nbytes(p.tensor)};
      ring_write(segment_, rank_, dst, reinterpret_cast<const uint8_t*>(&frame), sizeof(frame));
      p.framed = true;
      moved = true;
    }
    const int64_t n =
        ring_write(segment_, rank_, dst, bytes_of(p.tensor) + p.done, nbytes(p.tensor) - p.done);
    p.done += n;
    moved = moved || n > 0;
    if (p.done < nbytes(p.tensor)) break;  // the ring is full: the receiver will make room
    done.emplace_back(p.future, nullptr);
    queue.pop_front();
  }
  if (moved) ring_doorbell(segment_.rank_area(dst));
  return moved;
}

bool Mailbox::read_ring(int src, Completions& done) {
  Reading& r = reading_[src];
  bool moved = false;
  while (true) {
    if (!r.active) {
      if (ring_filled(segment_, src, rank_) < static_cast<int64_t>(sizeof(Frame))) break;
      Frame frame{};
      ring_read(segment_, src, rank_, reinterpret_cast<uint8_t*>(&frame), sizeof(frame));
      if (frame.bytes < 0 || frame.bytes > (int64_t{1} << 40)) {
        throw PeerFailure("rank " + std::to_string(src) +
                          "'s messages are out of step (a frame of " + std::to_string(frame.bytes) +
                          " bytes)");
      }
      r = Reading{};
      r.active = true;
      r.tag = frame.tag;
      r.bytes = frame.bytes;
      moved = true;
      for (Pending& p : recvs_[src]) {
        if (p.tag == r.tag) {
          r.into = &p;
          break;
        }
      }
      if (r.into == nullptr) r.stashed.resize(r.bytes);
    }
    uint8_t* target = r.stashed.data();
    const bool fits = r.into == nullptr || nbytes(r.into->tensor) == r.bytes;
    if (r.into != nullptr && fits) target = bytes_of(r.into->tensor);
    if (!fits) r.stashed.resize(r.bytes);  // read it off the ring, then refuse it
    if (!fits) target = r.stashed.data();
    const int64_t n = ring_read(segment_, src, rank_, target + r.done, r.bytes - r.done);
    r.done += n;
    moved = moved || n > 0;
    if (r.done < r.bytes) break;
    if (r.into != nullptr) {
      Pending* recv = r.into;
      if (fits) {
        done.emplace_back(recv->future, nullptr);
      } else {
        deliver(*recv, r.stashed.data(), r.bytes, src, done);
      }
      recvs_[src].remove_if([recv](const Pending& p) { return &p == recv; });
    } else {
      // Its receive may have been posted while the message was being read.
      std::list<Pending>& posted = recvs_[src];
      const int64_t tag = r.tag;
      auto match = std::find_if(posted.begin(), posted.end(),
                                [tag](const Pending& p) { return p.tag == tag; });
      if (match != posted.end()) {
        deliver(*match, r.stashed.data(), r.bytes, src, done);
        posted.erase(match);
      } else {
        stash_[src].push_back({r.tag, std::move(r.stashed)});
      }
    }
    r = Reading{};
  }
  if (moved) ring_doorbell(segment_.rank_area(src));  // room in its ring toward this rank
  return moved;
}

void Mailbox::deliver(Pending& recv, const uint8_t* data, int64_t bytes, int src,
                      Completions& done) {
  if (nbytes(recv.tensor) != bytes) {
    done.emplace_back(
        recv.future, std::make_exception_ptr(std::runtime_error(
                         "recv from rank " + std::to_string(src) + " tag " +
                         std::to_string(recv.tag) + ": the message holds " + std::to_string(bytes) +
                         " bytes, the tensor " + std::to_string(nbytes(recv.tensor)))));
    return;
  }
  std::memcpy(bytes_of(recv.tensor), data, bytes);
  done.emplace_back(recv.future, nullptr);
}

bool Mailbox::take_from_stash(Pending& recv, int src, Completions& done) {
  std::deque<Stashed>& stashed = stash_[src];
  for (auto it = stashed.begin(); it != stashed.end(); ++it) {
    if (it->tag != recv.tag) continue;
    deliver(recv, it->bytes.data(), static_cast<int64_t>(it->bytes.size()), src, done);
    stashed.erase(it);
    return true;
  }
  return false;
}

void Mailbox::fail_overdue(Completions& done) {
  const auto now = std::chrono::steady_clock::now();
  const int world = segment_.layout().world;
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank_ || broken_.count(peer) != 0) continue;
    if (sends_[peer].empty() && recvs_[peer].empty()) continue;
    // What arrived before the peer left still counts.
    if (ring_filled(segment_, peer, rank_) > 0) read_ring(peer, done);
    const std::string op = "point-to-point traffic with rank " + std::to_string(peer);
    try {
      check_peers_alive(segment_, op, [peer](int r) { return r == peer; });
    } catch (const PeerFailure&) {
      break_peer(peer, std::current_exception(), done);
      continue;
    }
    // Past its deadline: a send whose frame is not in the ring yet, or a receive nothing has
    // started to fill, fails alone. One cut short in mid-message breaks the pair's ring.
    const auto overdue = [&](const Pending& p, const char* what) {
      return std::make_exception_ptr(
          PeerFailure("timed out after " + std::to_string(timeout_ms_.load()) +
                      "ms waiting for rank " + std::to_string(peer) + " in " + what +
                      std::to_string(peer) + " (tag " + std::to_string(p.tag) + ")"));
    };
    bool cut = false;
    std::exception_ptr why;
    auto& sends = sends_[peer];
    for (auto it = sends.begin(); it != sends.end();) {
      if (now < it->deadline) {
        ++it;
        continue;
      }
      why = overdue(*it, "send to rank ");
      if (it->framed) {
        cut = true;
        break;
      }
      done.emplace_back(it->future, why);
      it = sends.erase(it);
    }
    auto& recvs = recvs_[peer];
    for (auto it = recvs.begin(); !cut && it != recvs.end();) {
      if (now < it->deadline) {
        ++it;
        continue;
      }
      why = overdue(*it, "recv from rank ");
      if (reading_[peer].into == &*it) {
        cut = true;
        break;
      }
      done.emplace_back(it->future, why);
      it = recvs.erase(it);
    }
    if (cut) break_peer(peer, why, done);
  }
}

}  // namespace shardscope::shm
