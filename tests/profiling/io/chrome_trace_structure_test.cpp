// The Chrome JSON of real runs, checked the way Perfetto's JSON importer reads it (its rules,
// re-implemented here: trace_processor cannot be run in the tests). Perfetto sorts events by
// timestamp, complete (X) events of equal ts longest first and before flow events; it keeps one
// stack of slices per thread and drops (or spills to an overflow track) an X slice that
// partially overlaps an open one; a v1 flow event (s, f with bp "e") binds to the topmost open
// slice of its thread when it is read, and is known by (id, cat, name); tid 0 is taken to mean
// "the pid". Whatever breaks one of these rules loses slices or arrows in the UI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "profiling/io/trace_io.h"
#include "tests/support/reference_check.h"
#include "tests/support/sample_trace.h"

namespace shardscope::profiling {
namespace {

using nlohmann::json;

int64_t perfetto_ns(const json& v) {
  return std::llround(v.get<double>() * 1000.0);
}

struct Slice {
  int64_t t0 = 0, t1 = 0;
  size_t order = 0;  // position in the file: Perfetto's tie-break
  const json* event = nullptr;
};

struct FlowEnd {
  int pid = 0, tid = 0;
  int64_t ts = 0;
  const json* bound = nullptr;  // the X slice Perfetto binds it to
};

// What the checks found: the figures, and every broken rule in words.
struct Structure {
  size_t x_events = 0;
  size_t flows = 0;
  size_t overlaps = 0;
  int max_comm_tracks = 0;         // on any one rank
  std::map<int, int> comm_tracks;  // by rank
  int overflow_tracks = 0;         // "<lane> (overlap k)": spans of another lane that do not nest
  std::vector<std::string> problems;  // the first few of each kind, in words
  std::map<std::string, int> problem_counts;
};

bool is_p2p(const json& slice) {
  const std::string name = slice.at("name");
  return name == "send" || name == "recv";
}

// Whether Perfetto pops an open slice ending at `end` (duration `dur`) when an X event of
// duration `new_dur` arrives at `ts`: intervals are closed on the left and open on the right,
// except that instants stack on instants.
bool pops(int64_t end, int64_t dur, int64_t ts, int64_t new_dur) {
  return end < ts || (end == ts && !(dur == 0 && new_dur == 0));
}

Structure check_structure(const json& doc) {
  Structure out;
  auto problem = [&](const std::string& kind, const std::string& detail) {
    if (++out.problem_counts[kind] <= 3) out.problems.push_back(kind + ": " + detail);
  };
  std::map<int, int> rank_of_pid;
  std::set<std::pair<int, int>> named_threads, used_threads;
  std::map<std::pair<int, int>, std::vector<Slice>> tracks;
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<const json*>> flows;
  size_t order = 0;
  for (const auto& e : doc.at("traceEvents")) {
    ++order;
    const std::string ph = e.at("ph");
    const int pid = e.at("pid");
    if (pid == 0) problem("pid 0", e.dump());
    if (e.contains("tid") && e["tid"] == 0) problem("tid 0", e.dump());
    const int tid = e.value("tid", 0);
    if (ph == "M" && e["name"] == "process_name") {
      const std::string name = e["args"]["name"];
      rank_of_pid[pid] = std::stoi(name.substr(name.find(' ') + 1));
    }
    if (ph == "M" && e["name"] == "thread_name") named_threads.insert({pid, tid});
    if (ph == "X") {
      ++out.x_events;
      used_threads.insert({pid, tid});
      const int64_t t0 = perfetto_ns(e.at("ts"));
      tracks[{pid, tid}].push_back({t0, t0 + perfetto_ns(e.at("dur")), order, &e});
    }
    if (ph == "s" || ph == "f") {
      used_threads.insert({pid, tid});
      flows[{e.at("id").dump(), e.value("cat", ""), e.value("name", "")}].push_back(&e);
    }
  }
  for (const auto& thread : used_threads) {
    if (!named_threads.count(thread)) {
      problem("no thread_name",
              "pid " + std::to_string(thread.first) + " tid " + std::to_string(thread.second));
    }
  }
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "M" || e["name"] != "thread_name") continue;
    const std::string name = e["args"].value("name", "");
    if (name.rfind("comm", 0) == 0) ++out.comm_tracks[rank_of_pid[e["pid"].get<int>()]];
    if (name.find("(overlap") != std::string::npos) ++out.overflow_tracks;
  }
  for (const auto& [rank, n] : out.comm_tracks) {
    out.max_comm_tracks = std::max(out.max_comm_tracks, n);
  }

  // Flow endpoints by thread, bound while the thread's slices are replayed in Perfetto's order.
  std::map<std::pair<int, int>, std::vector<FlowEnd*>> ends_by_thread;
  std::vector<FlowEnd> ends;
  size_t endpoint_count = 0;
  for (const auto& [key, events] : flows) endpoint_count += events.size();
  ends.reserve(endpoint_count);
  std::map<const json*, FlowEnd*> end_of_event;
  for (const auto& [key, events] : flows) {
    for (const json* e : events) {
      ends.push_back(
          {(*e)["pid"].get<int>(), e->value("tid", 0), perfetto_ns(e->at("ts")), nullptr});
      ends_by_thread[{ends.back().pid, ends.back().tid}].push_back(&ends.back());
      end_of_event[e] = &ends.back();
    }
  }
  for (auto& [thread, slices] : tracks) {
    std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return std::make_tuple(a.t0, b.t1 - b.t0, a.order) <
             std::make_tuple(b.t0, a.t1 - a.t0, b.order);
    });
    auto& waiting = ends_by_thread[thread];
    std::sort(waiting.begin(), waiting.end(),
              [](const FlowEnd* a, const FlowEnd* b) { return a->ts < b->ts; });
    std::vector<const Slice*> open;
    size_t next_end = 0;
    auto bind_ends_before = [&](int64_t ts, bool inclusive) {
      for (; next_end < waiting.size() &&
             (waiting[next_end]->ts < ts || (inclusive && waiting[next_end]->ts == ts));
           ++next_end) {
        // A flow event pops nothing: the topmost slice is the last one pushed and not popped.
        waiting[next_end]->bound = open.empty() ? nullptr : open.back()->event;
      }
    };
    for (const Slice& s : slices) {
      bind_ends_before(s.t0, false);
      const int64_t dur = s.t1 - s.t0;
      bool dropped = false;
      for (auto it = open.rbegin(); it != open.rend(); ++it) {
        const Slice& o = **it;
        if (s.t0 < o.t1 && s.t1 > o.t1) dropped = true;
      }
      if (dropped) {
        ++out.overlaps;
        problem("partial overlap", "pid " + std::to_string(thread.first) + " tid " +
                                       std::to_string(thread.second) + ": " + s.event->dump());
        continue;
      }
      while (!open.empty() && pops(open.back()->t1, open.back()->t1 - open.back()->t0, s.t0, dur))
        open.pop_back();
      open.push_back(&s);
    }
    bind_ends_before(INT64_MAX, true);
  }

  // Every flow: one start, one finish (bound to its enclosing slice), both on communication
  // slices of two ranks that took part in the same call.
  std::set<const json*> linked;
  for (const auto& [key, events] : flows) {
    const json* s = nullptr;
    const json* f = nullptr;
    for (const json* e : events) (e->at("ph") == "s" ? s : f) = e;
    if (events.size() != 2 || !s || !f) {
      problem("not one s and one f",
              "flow " + std::get<0>(key) + " has " + std::to_string(events.size()) + " events");
      continue;
    }
    ++out.flows;
    if (f->value("bp", "") != "e") problem("f without bp e", "flow " + std::get<0>(key));
    const json* from = end_of_event[s]->bound;
    const json* to = end_of_event[f]->bound;
    if (!from || !to) {
      problem("no enclosing slice", (from ? f : s)->dump());
      continue;
    }
    if (from->value("cat", "") != "collective" || to->value("cat", "") != "collective") {
      problem("bound to a slice that is not a call", from->dump() + " / " + to->dump());
      continue;
    }
    const int64_t from_ts = perfetto_ns(from->at("ts")), to_ts = perfetto_ns(to->at("ts"));
    if (from_ts != end_of_event[s]->ts || to_ts != end_of_event[f]->ts) {
      problem("bound to a slice it does not start", from->dump() + " / " + to->dump());
    }
    const json &a = from->at("args"), &b = to->at("args");
    const int rank_a = rank_of_pid[(*from)["pid"].get<int>()];
    const int rank_b = rank_of_pid[(*to)["pid"].get<int>()];
    bool same_call = a["group"] == b["group"] && rank_a != rank_b;
    if (is_p2p(*from) || is_p2p(*to)) {
      same_call = same_call && from->at("name") == "send" && to->at("name") == "recv" &&
                  a["peer"] == rank_b && b["peer"] == rank_a && a["seq"] == b["seq"];
    } else {
      same_call = same_call && from->at("name") == to->at("name") && a["seq"] == b["seq"];
    }
    if (!same_call) problem("links different calls", from->dump() + " / " + to->dump());
    linked.insert(from);
    linked.insert(to);
  }
  for (const auto& [thread, slices] : tracks) {
    for (const Slice& s : slices) {
      const json& e = *s.event;
      if (e.value("cat", "") != "collective") continue;
      if (e["args"].value("group_size", 0) > 1 && !linked.count(&e)) {
        problem(is_p2p(e) ? "send/recv not linked" : "collective not linked", e.dump());
      }
    }
  }
  return out;
}

// The four runs, world 4, 2 steps of the tiny model.
Config recorded_run(const std::string& name) {
  Config c = test::tiny_config(name == "pp" ? "ddp_bucketed" : name, 4, 1);
  if (name == "ddp_bucketed") {
    c.strategy_options.bucket_mb = 0.05;  // many small buckets, reduced while backward runs
    c.strategy_options.overlap = true;
  }
  if (name == "pp") {
    // As in the pp tests: a block per stage, micro-batches through the 1F1B schedule.
    c.strategy = "pp";
    c.model.layers = 4;
    c.strategy_options.micro_batches = 4;
    c.strategy_options.schedule = "1f1b";
  }
  c.steps = 2;
  c.reference = false;
  finalize(c);
  return c;
}

// The most calls of a rank in flight at once: what the greedy lowest-free-slot assignment must
// need, no more (it colours an interval graph in start order, which is optimal).
int max_in_flight(const RankTrace& r) {
  std::vector<const Event*> calls;
  for (const auto& e : r.events) {
    if (e.lane == kCommLane) calls.push_back(&e);
  }
  int most = calls.empty() ? 1 : 0;  // an idle comm lane still shows one (empty) slot
  for (const Event* e : calls) {
    int open = 0;
    for (const Event* f : calls) open += f == e || (f->t0_ns <= e->t0_ns && e->t0_ns < f->t1_ns);
    most = std::max(most, open);
  }
  return most;
}

class ChromeTraceOfARun : public testing::TestWithParam<std::string> {};

TEST_P(ChromeTraceOfARun, ShowsEveryEventInPerfetto) {
  RunSummary run = run_training(recorded_run(GetParam()));
  ASSERT_TRUE(run.ok) << run.failure;
  const std::string text = to_chrome_json(run.trace);
  const Structure s = check_structure(json::parse(text));
  std::cout << "[ structure ] " << GetParam() << ": " << s.x_events << " X events, "
            << s.max_comm_tracks << " comm tracks on the busiest rank, " << s.flows << " flows, "
            << s.overlaps << " partial overlaps, " << s.overflow_tracks << " overflow tracks\n";
  for (const auto& [kind, n] : s.problem_counts) {
    std::cout << "[ structure ]   " << n << " x " << kind << "\n";
  }
  for (const auto& p : s.problems) ADD_FAILURE() << p;
  for (const auto& r : run.trace.ranks) {
    EXPECT_EQ(s.comm_tracks.count(r.rank) ? s.comm_tracks.at(r.rank) : 0, max_in_flight(r))
        << "comm slots of rank " << r.rank;
  }
  EXPECT_EQ(s.overlaps, 0u);
  EXPECT_EQ(s.x_events, run.trace.event_count());
  EXPECT_GT(s.flows, 0u);
  // And it reads back as the same trace.
  test::expect_same_trace(run.trace, from_chrome_json(text));
}

INSTANTIATE_TEST_SUITE_P(Strategies, ChromeTraceOfARun,
                         testing::Values("ddp_bucketed", "fsdp", "zero2", "pp"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// The fuzzer's seed files open as the traces they were written from: two from before the comm
// lane was split (pid = rank, tid = lane, no rank or lane in the metadata) and one after.
TEST(ChromeTraceFiles, OldFilesStillOpen) {
  const std::string dir = std::string(SHARDSCOPE_SOURCE_DIR) + "/tests/fuzz/seeds/json";
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Trace t = from_chrome_json(text);
    ++files;
    const json doc = json::parse(text);
    size_t x = 0;
    std::set<int> pids;
    for (const auto& e : doc["traceEvents"]) {
      x += e["ph"] == "X";
      if (e["ph"] == "X") pids.insert(e["pid"].get<int>());
    }
    EXPECT_EQ(t.event_count(), x);
    ASSERT_EQ(t.ranks.size(), pids.size());
    for (size_t r = 0; r < t.ranks.size(); ++r) {
      EXPECT_EQ(t.ranks[r].rank, static_cast<int>(r));
      ASSERT_GE(t.ranks[r].lanes.size(), 2u);
      EXPECT_EQ(t.ranks[r].lanes[kHostLane], "host");
      EXPECT_EQ(t.ranks[r].lanes[kCommLane], "comm");
      for (const auto& e : t.ranks[r].events) {
        EXPECT_EQ(e.lane == kCommLane, e.category == Category::kCollective);
      }
    }
    // What was read writes out without overlaps, and reads back the same. (Not every call is
    // linked: in the failed run one rank stopped before its peers' last calls.)
    const std::string again = to_chrome_json(t);
    EXPECT_EQ(check_structure(json::parse(again)).overlaps, 0u);
    test::expect_same_trace(t, from_chrome_json(again));
  }
  EXPECT_GE(files, 1u);
}

// The checker itself catches what it is there to catch.
TEST(ChromeTraceChecker, FindsOverlapsUnlinkedCallsAndZeroIds) {
  const json bad = json::parse(R"({"traceEvents":[
    {"ph":"M","name":"process_name","pid":0,"args":{"name":"rank 0"}},
    {"ph":"M","name":"thread_name","pid":0,"tid":1,"args":{"name":"comm"}},
    {"ph":"X","name":"all_reduce","cat":"collective","pid":0,"tid":1,"ts":0,"dur":10,
     "args":{"group":"world","seq":0,"peer":-1,"group_size":2}},
    {"ph":"X","name":"all_reduce","cat":"collective","pid":0,"tid":1,"ts":5,"dur":10,
     "args":{"group":"world","seq":1,"peer":-1,"group_size":2}},
    {"ph":"s","id":1,"name":"collective","cat":"link","pid":0,"tid":1,"ts":20}]})");
  const Structure s = check_structure(bad);
  EXPECT_EQ(s.overlaps, 1u);
  auto says = [&](const std::string& what) {
    return std::any_of(s.problems.begin(), s.problems.end(),
                       [&](const std::string& p) { return p.find(what) != std::string::npos; });
  };
  EXPECT_TRUE(says("pid 0"));
  EXPECT_TRUE(says("not one s and one f"));
  EXPECT_TRUE(says("collective not linked"));
}

}  // namespace
}  // namespace shardscope::profiling
