#include "engine/comm/shm/shm_segment.h"

#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

namespace shardscope::shm {

namespace {

constexpr size_t kAlign = 64;

size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

size_t header_bytes() {
  return aligned(sizeof(std::atomic<uint32_t>));
}

std::string system_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

}  // namespace

size_t Layout::rank_area_offset(int rank) const {
  return header_bytes() + static_cast<size_t>(rank) * sizeof(RankArea);
}

size_t Layout::slot_offset(int buffer, int rank) const {
  const size_t data = aligned(rank_area_offset(world));
  return data + (static_cast<size_t>(buffer) * world + rank) * slot_bytes;
}

size_t Layout::ring_offset(int src, int dst) const {
  const size_t rings = slot_offset(2, 0);
  return rings + (static_cast<size_t>(src) * world + dst) * (sizeof(RingHeader) + ring_bytes);
}

size_t Layout::total_bytes() const {
  return ring_offset(world, 0);
}

int Segment::create_memfd(size_t bytes) {
  const int fd = static_cast<int>(syscall(SYS_memfd_create, "shardscope-shm", 0));
  if (fd < 0) throw std::runtime_error(system_error("memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string why = system_error("ftruncate of the shared segment");
    close(fd);
    throw std::runtime_error(why);
  }
  return fd;
}

Segment::Segment(const Layout& layout, int fd, bool create) : layout_(layout), fd_(fd) {
  void* base =
      mmap(nullptr, layout_.total_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, /*offset=*/0);
  if (base == MAP_FAILED) {
    const std::string why = system_error("mmap of the shared segment");
    close(fd_);
    throw std::runtime_error(why);
  }
  base_ = static_cast<uint8_t*>(base);
  // A fresh memfd reads as zeros, which is every atomic's initial state; placement-new makes
  // them objects of this process without writing anything.
  if (create) {
    new (&barrier_word()) std::atomic<uint32_t>(0);
    for (int r = 0; r < layout_.world; ++r) new (&rank_area(r)) RankArea();
    for (int s = 0; s < layout_.world; ++s)
      for (int d = 0; d < layout_.world; ++d) new (&ring_header(s, d)) RingHeader();
  }
}

Segment::~Segment() {
  if (base_ != nullptr) munmap(base_, layout_.total_bytes());
  if (fd_ >= 0) close(fd_);
}

RankArea& Segment::rank_area(int rank) const {
  return *reinterpret_cast<RankArea*>(base_ + layout_.rank_area_offset(rank));
}

uint8_t* Segment::slot(int buffer, int rank) const {
  return base_ + layout_.slot_offset(buffer, rank);
}

RingHeader& Segment::ring_header(int src, int dst) const {
  return *reinterpret_cast<RingHeader*>(base_ + layout_.ring_offset(src, dst));
}

uint8_t* Segment::ring_data(int src, int dst) const {
  return base_ + layout_.ring_offset(src, dst) + sizeof(RingHeader);
}

std::atomic<uint32_t>& Segment::barrier_word() const {
  return *reinterpret_cast<std::atomic<uint32_t>*>(base_);
}

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::milliseconds most) {
  timespec ts{};
  ts.tv_sec = most.count() / 1000;
  ts.tv_nsec = (most.count() % 1000) * 1000000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void ring_doorbell(RankArea& area) {
  area.doorbell.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(area.doorbell);
}

void check_peers_alive(const Segment& segment, const std::string& what,
                       const std::function<bool(int)>& missing) {
  for (int r = 0; r < segment.layout().world; ++r) {
    if (!missing(r)) continue;
    const RankArea& area = segment.rank_area(r);
    // Asked again after reading `gone`: a rank that arrived, finished and left in between is
    // not missing.
    if (area.gone.load(std::memory_order_acquire) != 0 && missing(r)) {
      throw PeerFailure("rank " + std::to_string(r) + " left the group during " + what);
    }
    const int pid = area.pid.load(std::memory_order_acquire);
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH && missing(r)) {
      throw PeerFailure("rank " + std::to_string(r) + " (pid " + std::to_string(pid) +
                        ") exited during " + what);
    }
  }
}

void wait_until(const Segment& segment, std::atomic<uint32_t>& word,
                const std::function<bool()>& done, const std::function<bool(int)>& missing,
                std::chrono::milliseconds timeout, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // A short spin first: a peer in the same round usually arrives within microseconds. Then
  // sleep on the futex, waking at least every 50 ms to look for departed peers.
  for (int spin = 0; spin < 64; ++spin) {
    if (done()) return;
    std::this_thread::yield();
  }
  using std::chrono::milliseconds;
  while (true) {
    const uint32_t seen = word.load(std::memory_order_acquire);
    if (done()) return;
    check_peers_alive(segment, what, missing);
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      // The last one may have arrived since: peers that passed on seeing this rank arrived must
      // not find it gone.
      if (done()) return;
      std::string ranks;
      for (int r = 0; r < segment.layout().world; ++r)
        if (missing(r)) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      throw PeerFailure(
          "timed out after " + std::to_string(timeout.count()) + "ms waiting for rank" +
          std::string(ranks.find(',') == std::string::npos ? " " : "s ") + ranks + " in " + what);
    }
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - now);
    futex_wait(word, seen, std::min(milliseconds(50), left + milliseconds(1)));
  }
}

void barrier(const Segment& segment, int rank, uint64_t number, std::chrono::milliseconds timeout,
             const std::string& what) {
  segment.rank_area(rank).arrived.store(number, std::memory_order_release);
  std::atomic<uint32_t>& word = segment.barrier_word();
  word.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(word);
  const int world = segment.layout().world;
  const auto behind = [&](int r) {
    return segment.rank_area(r).arrived.load(std::memory_order_acquire) < number;
  };
  wait_until(
      segment, word,
      [&] {
        for (int r = 0; r < world; ++r)
          if (behind(r)) return false;
        return true;
      },
      behind, timeout, what);
}

}  // namespace shardscope::shm
