#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace shardscope::shm {

// One process group's shared memory: a memfd that rank 0 creates and every other rank of the
// group maps through /proc/<pid>/fd (rank threads of one process and rank processes of one host
// alike). It has no name, so nothing is left behind: it goes when the last rank unmaps it.
//
// Layout, every part 64-byte aligned:
//   Header | RankArea x world | data: 2 buffers x world slots x slot_bytes | rings: world x world
// Collectives exchange through the data slots, in rounds separated by barriers; a round uses the
// two buffers alternately, so a rank may fill the next round's slot while a slow peer still reads
// this round's (barrier() explains why two suffice). Point-to-point messages travel through the
// rings, one per ordered pair of ranks.
struct Layout {
  int world = 1;
  size_t slot_bytes = 0;
  size_t ring_bytes = 0;

  size_t rank_area_offset(int rank) const;
  size_t slot_offset(int buffer, int rank) const;
  size_t ring_offset(int src, int dst) const;
  size_t total_bytes() const;
};

struct alignas(64) RankArea {
  std::atomic<uint64_t> arrived{0};   // the last barrier this rank reached
  std::atomic<uint32_t> doorbell{0};  // bumped (and futex-woken) when its mailbox has news
  std::atomic<int32_t> pid{0};
  std::atomic<uint32_t> gone{0};         // 1 once its group is destroyed or aborted
  std::atomic<uint32_t> reads_peers{0};  // 1 if it read every peer process's probe (peer_reads.h)
  std::atomic<uint32_t> path_wish{0};    // a hash of its SHARDSCOPE_SHM_PATH, compared at joining
  // Where this rank's tensors of the current collective are (in its own address space), so that
  // peers read and write them directly (no copy through the slots). One per destination.
  std::atomic<uint64_t> published[64];
};

struct alignas(64) RingHeader {
  std::atomic<uint64_t> head{0};              // bytes the sender has written, ever
  alignas(64) std::atomic<uint64_t> tail{0};  // bytes the receiver has consumed, ever
};

// A peer that will not arrive: named in the error a wait throws.
class PeerFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Segment {
 public:
  // Maps a new segment (rank 0) or an existing one (`opened_fd` from /proc).
  Segment(const Layout& layout, int fd, bool create);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  static int create_memfd(size_t bytes);

  const Layout& layout() const { return layout_; }
  int fd() const { return fd_; }
  RankArea& rank_area(int rank) const;
  uint8_t* slot(int buffer, int rank) const;
  RingHeader& ring_header(int src, int dst) const;
  uint8_t* ring_data(int src, int dst) const;
  std::atomic<uint32_t>& barrier_word() const;

 private:
  Layout layout_;
  int fd_ = -1;
  uint8_t* base_ = nullptr;
};

// Futex waits on a 32-bit word of shared memory (no FUTEX_PRIVATE_FLAG: the word is shared
// between processes).
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::milliseconds most);
void futex_wake_all(std::atomic<uint32_t>& word);
void ring_doorbell(RankArea& area);

// Raises PeerFailure if a rank that `missing` names has left the group or its process exited.
void check_peers_alive(const Segment& segment, const std::string& what,
                       const std::function<bool(int)>& missing);

// Waits until `done` holds, sleeping on `word` between checks (it must be bumped whenever what
// `done` reads changes). After `timeout`, or when a rank `missing` names is gone, throws a
// PeerFailure naming the ranks `missing` names, the timeout and `what` they were awaited for.
void wait_until(const Segment& segment, std::atomic<uint32_t>& word,
                const std::function<bool()>& done, const std::function<bool(int)>& missing,
                std::chrono::milliseconds timeout, const std::string& what);

// Barrier number `number` (each rank's barriers count 1, 2, 3, ... in the same order): returns
// once every rank has reached it.
void barrier(const Segment& segment, int rank, uint64_t number, std::chrono::milliseconds timeout,
             const std::string& what);

}  // namespace shardscope::shm
