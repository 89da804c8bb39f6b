#include "profiling/metrics/comm_links.h"

#include <algorithm>
#include <tuple>

namespace shardscope::profiling {
namespace {

enum class Kind : uint8_t { kCollective, kSend, kRecv };

// A call on one rank, keyed so that its counterparts on other ranks sort next to it.
struct Call {
  uint32_t group;
  int64_t seq;
  uint32_t op;  // collectives: the op's name; point to point: unused
  int sender;   // point to point: world ranks of the two ends
  int receiver;
  uint32_t rank;   // index into Trace::ranks
  uint32_t event;  // index into its events

  auto key() const { return std::tie(group, seq, op, sender, receiver); }
};

}  // namespace

std::vector<CommLink> link_communication(const Trace& trace) {
  // What each interned name is, looked up once per string rather than once per event.
  std::vector<Kind> kind_of(trace.strings.size(), Kind::kCollective);
  for (size_t s = 0; s < trace.strings.size(); ++s) {
    if (trace.strings[s] == "send") kind_of[s] = Kind::kSend;
    if (trace.strings[s] == "recv") kind_of[s] = Kind::kRecv;
  }
  std::vector<Call> collectives, p2p;
  for (uint32_t r = 0; r < trace.ranks.size(); ++r) {
    const RankTrace& rank = trace.ranks[r];
    for (uint32_t i = 0; i < rank.events.size(); ++i) {
      const Event& e = rank.events[i];
      if (e.category != Category::kCollective || e.seq < 0) continue;
      const Kind kind = e.name < kind_of.size() ? kind_of[e.name] : Kind::kCollective;
      if (kind == Kind::kCollective) {
        collectives.push_back({e.group, e.seq, e.name, -1, -1, r, i});
      } else if (e.peer >= 0) {
        const bool send = kind == Kind::kSend;
        p2p.push_back(
            {e.group, e.seq, 0, send ? rank.rank : e.peer, send ? e.peer : rank.rank, r, i});
      }
    }
  }
  auto by_key = [](const Call& a, const Call& b) {
    return std::tie(a.group, a.seq, a.op, a.sender, a.receiver, a.rank, a.event) <
           std::tie(b.group, b.seq, b.op, b.sender, b.receiver, b.rank, b.event);
  };
  std::sort(collectives.begin(), collectives.end(), by_key);
  std::sort(p2p.begin(), p2p.end(), by_key);
  const auto& event = [&](const Call& c) -> const Event& {
    return trace.ranks[c.rank].events[c.event];
  };

  std::vector<CommLink> links;
  for (size_t begin = 0, end = 0; begin < collectives.size(); begin = end) {
    end = begin + 1;
    while (end < collectives.size() && collectives[end].key() == collectives[begin].key()) ++end;
    if (end - begin < 2) continue;
    // The root where every member names the same one and it is among them; else the first
    // issuer (ties to the lowest rank).
    size_t centre = begin;
    for (size_t k = begin + 1; k < end; ++k) {
      if (event(collectives[k]).t0_ns < event(collectives[centre]).t0_ns) centre = k;
    }
    const int16_t root = event(collectives[begin]).peer;
    bool rooted = root >= 0;
    for (size_t k = begin; k < end && rooted; ++k) rooted = event(collectives[k]).peer == root;
    for (size_t k = begin; k < end && rooted; ++k) {
      if (trace.ranks[collectives[k].rank].rank == root) {
        centre = k;
        break;
      }
    }
    for (size_t k = begin; k < end; ++k) {
      if (collectives[k].rank == collectives[centre].rank) continue;  // a hostile file's twin
      links.push_back({collectives[centre].rank, collectives[centre].event, collectives[k].rank,
                       collectives[k].event, false});
    }
  }
  // A send and its recv share a key; any other number of calls under one key is not a pair.
  for (size_t begin = 0, end = 0; begin < p2p.size(); begin = end) {
    end = begin + 1;
    while (end < p2p.size() && p2p[end].key() == p2p[begin].key()) ++end;
    if (end - begin != 2) continue;
    const Call* send = &p2p[begin];
    const Call* recv = &p2p[begin + 1];
    if (kind_of[event(*send).name] != Kind::kSend) std::swap(send, recv);
    if (kind_of[event(*send).name] != Kind::kSend || kind_of[event(*recv).name] != Kind::kRecv)
      continue;
    links.push_back({send->rank, send->event, recv->rank, recv->event, true});
  }
  return links;
}

}  // namespace shardscope::profiling
