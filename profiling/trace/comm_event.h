#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shardscope::profiling {

// One communication call as seen by the rank that made it. `seq` counts collectives within a
// group, so the same collective can be matched across ranks; point-to-point calls carry the peer.
struct CommEvent {
  std::string op;     // logical op: all_reduce, all_gather_into, reduce_scatter_tensor, send, ...
  std::string group;  // process-group name ("world" for the default group)
  std::string dtype;
  int64_t bytes = 0;  // payload of this rank's input (for all_gather: its contribution)
  int group_size = 0;
  int peer = -1;     // send/recv peer or root, as a world rank; -1 when not applicable
  uint64_t seq = 0;  // per-group sequence number of collectives (p2p ops have their own count)
  bool async = false;
  bool emulated = false;  // implemented from other collectives because the backend lacks it
  int32_t step = -1;      // where the rank was when it made the call (-1: outside training steps)
  int16_t micro = -1;
  int64_t t_issue_ns = 0;
  int64_t t_wait_begin_ns = 0;  // when the caller started waiting (0 if never waited)
  int64_t t_complete_ns = 0;    // when the backend reported completion (0 if never)
  int64_t t_wait_end_ns = 0;    // when the caller's wait returned (0 if never waited)
};

// A communication call as the rank makes it, before it is logged: the names are views (literals,
// the group's name, the dtype's), which the log interns, so recording a call copies no string.
struct CommCall {
  std::string_view op;
  std::string_view group;
  std::string_view dtype;
  int64_t bytes = 0;
  int group_size = 0;
  int peer = -1;
  uint64_t seq = 0;
  bool async = false;
  bool emulated = false;
  int64_t t_issue_ns = 0;

  CommCall() = default;
  // The call an event read back from elsewhere records (its views point into `e`).
  CommCall(const CommEvent& e)
      : op(e.op),
        group(e.group),
        dtype(e.dtype),
        bytes(e.bytes),
        group_size(e.group_size),
        peer(e.peer),
        seq(e.seq),
        async(e.async),
        emulated(e.emulated),
        t_issue_ns(e.t_issue_ns) {}
};

}  // namespace shardscope::profiling
