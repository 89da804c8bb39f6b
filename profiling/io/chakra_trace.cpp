#include "profiling/io/chakra_trace.h"

#include <algorithm>
#include <queue>
#include <stdexcept>

#ifdef SHARDSCOPE_HAVE_CHAKRA
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "profiling/io/chakra/chakra_et.pb.h"
#endif

namespace shardscope::profiling {

std::string chakra_file_name(int rank) {
  return "rank-" + std::to_string(rank) + ".et";
}

#ifdef SHARDSCOPE_HAVE_CHAKRA

bool chakra_export_built() {
  return true;
}

namespace {

namespace pb = ChakraProtoMsg;

bool contains(const std::string& name, const char* part) {
  return name.find(part) != std::string::npos;
}

// What a communication event's name says it is; false for what Chakra has no type for.
bool comm_kind(const std::string& raw, pb::NodeType* type, pb::CollectiveCommType* op) {
  std::string name;
  for (char c : raw) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  *type = pb::COMM_COLL_NODE;
  if (contains(name, "send")) {
    *type = pb::COMM_SEND_NODE;
  } else if (contains(name, "recv")) {
    *type = pb::COMM_RECV_NODE;
  } else if (contains(name, "all_to_all") || contains(name, "alltoall")) {
    *op = pb::ALL_TO_ALL;
  } else if (contains(name, "reduce_scatter") || contains(name, "reducescatter")) {
    *op = pb::REDUCE_SCATTER;
  } else if (contains(name, "all_gather") || contains(name, "allgather")) {
    *op = pb::ALL_GATHER;
  } else if (contains(name, "all_reduce") || contains(name, "allreduce")) {
    *op = pb::ALL_REDUCE;
  } else if (contains(name, "broadcast")) {
    *op = pb::BROADCAST;
  } else if (contains(name, "barrier")) {
    *op = pb::BARRIER;
  } else if (contains(name, "scatter")) {
    *op = pb::SCATTER;
  } else if (contains(name, "gather")) {
    *op = pb::GATHER;
  } else if (contains(name, "reduce")) {
    *op = pb::REDUCE;
  } else {
    return false;
  }
  return true;
}

// The events that become nodes: compute leaves and communication, in the order they started.
std::vector<const Event*> node_events(const RankTrace& rank) {
  const bool has_kernels = std::any_of(rank.events.begin(), rank.events.end(), [](const Event& e) {
    return e.category == Category::kKernel || e.category == Category::kMemcpy;
  });
  std::vector<const Event*> compute, out;
  for (const auto& e : rank.events) {
    if (e.category == Category::kCollective) {
      out.push_back(&e);
    } else if (has_kernels
                   ? (e.category == Category::kKernel || e.category == Category::kMemcpy)
                   : (e.category == Category::kForward || e.category == Category::kBackward ||
                      e.category == Category::kOptimizer)) {
      compute.push_back(&e);
    }
  }
  // Host spans nest (a block's forward inside a micro-batch's): only those holding no other
  // compute span are nodes, so no time is counted twice. Events are sorted by (lane, t0).
  for (size_t i = 0; i < compute.size(); ++i) {
    const Event& e = *compute[i];
    const bool holds_next = i + 1 < compute.size() && compute[i + 1]->lane == e.lane &&
                            compute[i + 1]->t0_ns < e.t1_ns && compute[i + 1]->t1_ns <= e.t1_ns;
    if (has_kernels || !holds_next) out.push_back(&e);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Event* a, const Event* b) { return a->t0_ns < b->t0_ns; });
  return out;
}

void add_attr(pb::Node& node, const char* name, int64_t value) {
  auto* a = node.add_attr();
  a->set_name(name);
  a->set_int64_val(value);
}
void add_attr32(pb::Node& node, const char* name, int32_t value) {
  auto* a = node.add_attr();
  a->set_name(name);
  a->set_int32_val(value);
}

void append_message(const google::protobuf::MessageLite& message, std::string& out) {
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.WriteVarint32(static_cast<uint32_t>(message.ByteSizeLong()));
  message.SerializeToCodedStream(&coded);
}

// The latest-ending node of each kind (compute, communication) that has ended by a time.
class FinishedNodes {
 public:
  void started(int64_t t1_ns, uint64_t id, bool comm) { running_.push({t1_ns, id, comm}); }
  // Retires what ended by `now`; the latest of each kind is then at hand.
  void advance(int64_t now) {
    while (!running_.empty() && running_.top().t1 <= now) {
      const Running r = running_.top();
      running_.pop();
      Latest& latest = r.comm ? comm_ : compute_;
      if (r.t1 >= latest.t1) latest = {r.t1, r.id, true};
    }
  }
  bool latest(bool comm, uint64_t* id) const {
    const Latest& l = comm ? comm_ : compute_;
    *id = l.id;
    return l.valid;
  }

 private:
  struct Running {
    int64_t t1;
    uint64_t id;
    bool comm;
    bool operator>(const Running& o) const { return t1 > o.t1; }
  };
  struct Latest {
    int64_t t1 = 0;
    uint64_t id = 0;
    bool valid = false;
  };
  std::priority_queue<Running, std::vector<Running>, std::greater<Running>> running_;
  Latest comm_, compute_;
};

}  // namespace

std::string to_chakra_et(const Trace& trace, const RankTrace& rank) {
  std::string out;
  pb::GlobalMetadata meta;
  meta.set_version("0.0.4");
  auto* source = meta.add_attr();
  source->set_name("source");
  source->set_string_val("shardscope: " + trace.run.strategy + ", world " +
                         std::to_string(trace.ranks.size()) + ", rank " +
                         std::to_string(rank.rank));
  append_message(meta, out);

  const std::vector<const Event*> events = node_events(rank);
  const int64_t origin = events.empty() ? 0 : events.front()->t0_ns;
  // Where the host blocked on communication: a compute after such a wait depends on what it
  // waited for; one that merely overlaps communication does not.
  std::vector<std::vector<int64_t>> wait_ends(256);
  for (const auto& e : rank.events)
    if (e.category == Category::kWait) wait_ends[e.lane].push_back(e.t1_ns);
  for (auto& ends : wait_ends) std::sort(ends.begin(), ends.end());
  std::vector<int64_t> last_on_lane(256, -1), lane_free_ns(256, INT64_MIN);
  FinishedNodes finished;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = *events[i];
    pb::Node node;
    node.set_id(i);
    node.set_name(trace.str(e.name));
    node.set_start_time_micros(static_cast<uint64_t>((e.t0_ns - origin) / 1000));
    node.set_duration_micros(static_cast<uint64_t>(std::max<int64_t>(0, e.t1_ns - e.t0_ns) / 1000));
    const bool comm = e.category == Category::kCollective;
    pb::NodeType type = pb::COMP_NODE;
    pb::CollectiveCommType op = pb::ALL_REDUCE;
    if (comm && !comm_kind(trace.str(e.name), &type, &op)) continue;
    node.set_type(type);
    if (type == pb::COMM_COLL_NODE) {
      add_attr(node, "comm_type", op);
      add_attr(node, "comm_size", e.bytes);
      auto* group = node.add_attr();
      group->set_name("pg_name");
      group->set_string_val(trace.str(e.group));
    } else if (type == pb::COMM_SEND_NODE || type == pb::COMM_RECV_NODE) {
      const bool send = type == pb::COMM_SEND_NODE;
      add_attr32(node, "comm_src", send ? rank.rank : e.peer);
      add_attr32(node, "comm_dst", send ? e.peer : rank.rank);
      add_attr(node, "comm_size", e.bytes);
      add_attr32(node, "comm_tag", static_cast<int32_t>(e.seq));
    }
    auto* is_cpu = node.add_attr();
    is_cpu->set_name("is_cpu_op");
    is_cpu->set_bool_val(false);
    const int64_t before = last_on_lane[e.lane];
    if (before >= 0) node.add_ctrl_deps(static_cast<uint64_t>(before));
    finished.advance(e.t0_ns);
    uint64_t dep = 0;
    const auto& waits = wait_ends[e.lane];
    const auto wait = std::upper_bound(waits.begin(), waits.end(), lane_free_ns[e.lane]);
    const bool waited = wait != waits.end() && *wait <= e.t0_ns;
    if ((comm || waited) && finished.latest(!comm, &dep) && dep != uint64_t(before))
      node.add_data_deps(dep);
    last_on_lane[e.lane] = static_cast<int64_t>(i);
    lane_free_ns[e.lane] = e.t1_ns;
    finished.started(e.t1_ns, i, comm);
    append_message(node, out);
  }
  return out;
}

#else  // no protobuf in this build

bool chakra_export_built() {
  return false;
}

std::string to_chakra_et(const Trace&, const RankTrace&) {
  throw std::runtime_error("this build has no protobuf: Chakra export is off");
}

#endif

}  // namespace shardscope::profiling
