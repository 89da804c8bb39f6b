#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/train/config.h"
#include "profiling/record/rank_event_log.h"
#include "profiling/trace/trace.h"

namespace shardscope::gui {

// Runs queued configurations one after another on a worker thread: runs share this machine, so
// running one at a time keeps their timings comparable. Finished traces (also of failed or
// stopped runs: what was recorded up to the failure) are handed to the GUI thread.
class LaunchQueue {
 public:
  struct Progress {
    int id = 0;
    std::string label;
    std::string status;  // queued | running | done | failed | stopped
    int step = 0, steps = 0;
    double loss = 0;
    std::string failure;
    std::string resumed_from;  // the checkpoint folder the run started from, if any
    std::string checkpoint;    // the last checkpoint folder it wrote, if any
    int resumed_as = 0;        // the id of the run that continues this one
    // Stopped or failed with a checkpoint written, and not resumed yet: resume(id) continues it.
    bool resumable() const {
      return (status == "stopped" || status == "failed") && !checkpoint.empty() && resumed_as == 0;
    }
  };

  LaunchQueue() = default;
  ~LaunchQueue();
  LaunchQueue(const LaunchQueue&) = delete;
  LaunchQueue& operator=(const LaunchQueue&) = delete;

  // `config` must be finalized. Returns the run's id.
  int enqueue(const Config& config, const std::string& label);
  // Drops what is queued and stops the running run after the step its ranks are in (threads
  // and processes alike; see engine/launch/stop_request.h).
  void stop_all();
  // Queues the run that continues run `id` from the last checkpoint it wrote (that step's
  // folder, not the newest in the directory, which a later run may have written), as
  // `--resume` does. A run is resumed once. Returns the new run's id; throws
  // std::invalid_argument when run `id` is unknown, was resumed already, or has nothing to
  // resume from.
  int resume(int id);
  std::vector<Progress> progress() const;
  bool idle() const;
  struct Finished {
    int id = 0;
    std::string label;
    profiling::Trace trace;
  };
  std::vector<Finished> take_finished();
  // What the running run has recorded so far (thread mode): false when nothing is running or
  // its ranks have not started. `id` says which run it is.
  bool live_trace(profiling::Trace* trace, int* id);

 private:
  void work();
  int enqueue_locked(const Config& config, const std::string& label);  // mutex_ held

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<int> queue_;  // ids of the runs waiting, in order
  std::vector<Progress> progress_;
  std::map<int, Config> configs_;  // every run's, by id
  std::vector<Finished> finished_;
  bool running_ = false;
  bool shutting_down_ = false;
  int next_id_ = 1;
  std::thread worker_;
  // The running run's logs while its ranks train; the mutex keeps them alive while a live trace
  // is built from them.
  std::mutex live_mutex_;
  std::vector<const profiling::RankEventLog*> live_logs_;
  profiling::RunRecord live_description_;
  int live_id_ = 0;
};

}  // namespace shardscope::gui
