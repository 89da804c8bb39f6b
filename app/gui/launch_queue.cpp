#include "app/gui/launch_queue.h"

#include <algorithm>
#include <csignal>
#include <stdexcept>

#include "engine/launch/stop_request.h"
#include "engine/train/run.h"
#include "profiling/trace/trace_builder.h"

namespace shardscope::gui {

LaunchQueue::~LaunchQueue() {
  bool stop_running = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutting_down_ = true;
    queue_.clear();
    stop_running = running_ && stop_requested() == 0;
  }
  // A run in progress ends at its step's end, as with Stop; the request is this queue's, so it
  // goes with it. It is process-wide: left set, every later training in the process (the tests
  // run many after closing the app) stopped after its first step.
  if (stop_running) request_stop(SIGINT);
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (stop_running) clear_stop_request();
}

int LaunchQueue::enqueue(const Config& config, const std::string& label) {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueue_locked(config, label);
}

int LaunchQueue::enqueue_locked(const Config& config, const std::string& label) {
  const int id = next_id_++;
  configs_[id] = config;
  queue_.push_back(id);
  Progress p;
  p.id = id;
  p.label = label;
  p.status = "queued";
  p.steps = config.steps;
  progress_.push_back(p);
  if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  wake_.notify_all();
  return id;
}

int LaunchQueue::resume(int id) {
  // All under one lock: a second click cannot queue a second continuation.
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = std::find_if(progress_.begin(), progress_.end(),
                            [&](const Progress& p) { return p.id == id; });
  if (found == progress_.end() || configs_.count(id) == 0)
    throw std::invalid_argument("no run #" + std::to_string(id));
  if (found->resumed_as != 0) {
    throw std::invalid_argument("run #" + std::to_string(id) + " was resumed already, as #" +
                                std::to_string(found->resumed_as));
  }
  if (!found->resumable()) {
    throw std::invalid_argument("run #" + std::to_string(id) + " is " + found->status +
                                (found->checkpoint.empty() ? " and wrote no checkpoint" : "") +
                                ": nothing to resume");
  }
  Config config = configs_[id];
  config.resume = found->checkpoint;
  config.fault = FaultInjection{};
  const std::string label = found->label + " resumed";
  const size_t index = static_cast<size_t>(found - progress_.begin());
  const int made = enqueue_locked(config, label);  // invalidates `found`
  progress_[index].resumed_as = made;
  return made;
}

void LaunchQueue::stop_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const int id : queue_) {
    for (auto& p : progress_) {
      if (p.id == id) p.status = "stopped";
    }
  }
  queue_.clear();
  // As Ctrl-C would: every rank (thread or process) finishes the step it is in, the same one,
  // and the run ends normally with its trace, and a checkpoint when it has a directory.
  if (running_) request_stop(SIGINT);
}

std::vector<LaunchQueue::Progress> LaunchQueue::progress() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return progress_;
}

bool LaunchQueue::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty() && !running_;
}

bool LaunchQueue::live_trace(profiling::Trace* trace, int* id) {
  std::lock_guard<std::mutex> lock(live_mutex_);
  if (live_logs_.empty()) return false;
  *trace = profiling::build_trace(live_description_, live_logs_);
  *id = live_id_;
  return true;
}

std::vector<LaunchQueue::Finished> LaunchQueue::take_finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Finished> out;
  out.swap(finished_);
  return out;
}

void LaunchQueue::work() {
  for (;;) {
    struct {
      int id = 0;
      Config config;
    } job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return shutting_down_ || !queue_.empty(); });
      if (shutting_down_) return;
      job.id = queue_.front();
      job.config = configs_.at(job.id);
      queue_.pop_front();
      running_ = true;
      clear_stop_request();
    }
    auto update = [&](const std::function<void(Progress&)>& change) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& p : progress_) {
        if (p.id == job.id) change(p);
      }
    };
    update([](Progress& p) { p.status = "running"; });
    RunCallbacks callbacks;
    callbacks.on_step = [&](const StepRecord& record) {
      update([&](Progress& p) {
        p.step = record.step + 1;
        p.loss = record.loss;
      });
    };
    {
      std::lock_guard<std::mutex> lock(live_mutex_);
      live_description_ = run_description(job.config);
      live_id_ = job.id;
    }
    callbacks.watch_logs = [this](const std::vector<const profiling::RankEventLog*>* logs) {
      std::lock_guard<std::mutex> lock(live_mutex_);
      if (logs != nullptr) {
        live_logs_ = *logs;
      } else {
        live_logs_.clear();
      }
    };
    Finished finished;
    finished.id = job.id;
    std::string status = "done", failure, resumed_from, checkpoint;
    try {
      RunSummary summary = run_training(job.config, callbacks);
      finished.trace = std::move(summary.trace);
      resumed_from = summary.resumed_from;
      checkpoint = summary.checkpoint;
      if (!summary.ok) {
        status = "failed";
        failure = summary.failure;
      } else if (summary.stopped_by_signal != 0) {
        status = "stopped";
      }
    } catch (const std::exception& e) {
      status = "failed";
      failure = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& p : progress_) {
        if (p.id != job.id) continue;
        p.status = status;
        p.failure = failure;
        p.resumed_from = resumed_from;
        p.checkpoint = checkpoint;
        finished.label = p.label;
      }
      if (!finished.trace.ranks.empty()) finished_.push_back(std::move(finished));
      running_ = false;
      clear_stop_request();
    }
  }
}

}  // namespace shardscope::gui
