// The two decisions behind the Chrome file's layout, on hand-made ranks: which thread each
// event goes on (comm slots, overflow tracks) and which calls are joined by arrows.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "profiling/io/chrome_tracks.h"
#include "profiling/metrics/comm_links.h"

namespace shardscope::profiling {
namespace {

Event span(int64_t t0, int64_t t1, uint8_t lane) {
  Event e;
  e.t0_ns = t0;
  e.t1_ns = t1;
  e.lane = lane;
  e.category = lane == kCommLane ? Category::kCollective : Category::kOther;
  return e;
}

std::vector<std::string> names(const ChromeThreads& t) {
  std::vector<std::string> out;
  for (const auto& thread : t.threads) out.push_back(thread.name);
  return out;
}

TEST(ChromeThreads, EachCallTakesTheLowestFreeSlot) {
  RankTrace r;
  r.lanes = {"host", "comm"};
  r.events = {span(0, 100, kHostLane), span(0, 10, kCommLane), span(5, 15, kCommLane),
              span(10, 12, kCommLane),  // slot 0 is free again once the first call ends
              span(11, 30, kCommLane),  // both busy: a third slot
              span(12, 20, kCommLane),  // slot 0 again
              span(40, 40, kCommLane), span(40, 40, kCommLane)};  // instants stack: two slots
  const ChromeThreads t = assign_chrome_threads(r);
  EXPECT_EQ(names(t), (std::vector<std::string>{"host", "comm 0", "comm 1", "comm 2"}));
  EXPECT_EQ(t.tid_of_event, (std::vector<int>{1, 2, 3, 2, 4, 2, 2, 3}));
}

TEST(ChromeThreads, SpansThatDoNotNestGoToAnOverflowTrack) {
  RankTrace r;
  r.lanes = {"host", "comm"};
  r.events = {span(0, 100, kHostLane), span(10, 50, kHostLane), span(40, 60, kHostLane),
              span(60, 70, kHostLane), span(100, 120, kHostLane)};
  const ChromeThreads t = assign_chrome_threads(r);
  // The comm lane keeps a thread of its own even with nothing on it (its name must survive).
  EXPECT_EQ(names(t), (std::vector<std::string>{"host", "host (overlap 1)", "comm 0"}));
  EXPECT_EQ(t.tid_of_event, (std::vector<int>{1, 1, 2, 1, 1}));
  EXPECT_EQ(t.threads[2].lane, kCommLane);
}

TEST(ChromeThreads, LanesWithoutANameGetOne) {
  RankTrace r;
  r.events = {span(0, 1, 3)};
  const ChromeThreads t = assign_chrome_threads(r);
  EXPECT_EQ(names(t), (std::vector<std::string>{"lane 0", "lane 1 0", "lane 2", "lane 3"}));
  EXPECT_EQ(t.tid_of_event, (std::vector<int>{4}));
}

TEST(CommLinks, RootedCollectivesStartAtTheRootAndSendsEndAtTheirRecv) {
  Trace t;
  const uint32_t world = t.intern("world");
  for (int rank = 0; rank < 3; ++rank) {
    RankTrace r;
    r.rank = rank;
    Event bcast = span(100 - rank, 200, kCommLane);  // rank 2 issues first, rank 1 is the root
    bcast.name = t.intern("broadcast");
    bcast.group = world;
    bcast.seq = 7;
    bcast.peer = 1;
    r.events.push_back(bcast);
    Event all_reduce = bcast;
    all_reduce.name = t.intern("all_reduce");
    all_reduce.seq = 8;
    all_reduce.peer = -1;
    all_reduce.t0_ns = 300 + rank;
    all_reduce.t1_ns = 350;
    r.events.push_back(all_reduce);
    t.ranks.push_back(r);
  }
  // Rank 0 sends to rank 2 twice; the second send's recv is missing (a failed peer).
  for (int k = 0; k < 2; ++k) {
    Event send = span(400 + k, 500, kCommLane);
    send.name = t.intern("send");
    send.group = world;
    send.seq = k;
    send.peer = 2;
    t.ranks[0].events.push_back(send);
  }
  Event recv = span(450, 500, kCommLane);
  recv.name = t.intern("recv");
  recv.group = world;
  recv.seq = 0;
  recv.peer = 0;
  t.ranks[2].events.push_back(recv);

  std::vector<std::string> got;
  for (const CommLink& l : link_communication(t)) {
    got.push_back(t.str(t.ranks[l.from_rank].events[l.from_event].name) + " " +
                  std::to_string(l.from_rank) + "->" + std::to_string(l.to_rank) +
                  (l.point_to_point ? " p2p" : ""));
  }
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"all_reduce 0->1", "all_reduce 0->2", "broadcast 1->0",
                                           "broadcast 1->2", "send 0->2 p2p"}));
}

}  // namespace
}  // namespace shardscope::profiling
