#include "app/gui/launch_queue.h"

#include <stdexcept>

#include "engine/run.h"
#include "profiling/trace_builder.h"

namespace shardscope::gui {

namespace {

// Thrown on rank 0 at a step boundary: the launcher tears the run down as a rank failure, so
// the other ranks stop within the collective timeout and the trace so far is kept.
struct StoppedByUser : std::runtime_error {
  StoppedByUser() : std::runtime_error("stopped by the user") {}
};

}  // namespace

LaunchQueue::~LaunchQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutting_down_ = true;
    queue_.clear();
  }
  stop_running_ = true;
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

int LaunchQueue::enqueue(const Config& config, const std::string& label) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int id = next_id_++;
  queue_.push_back({id, config});
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

void LaunchQueue::stop_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& job : queue_) {
    for (auto& p : progress_) {
      if (p.id == job.id) p.status = "stopped";
    }
  }
  queue_.clear();
  stop_running_ = true;
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
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return shutting_down_ || !queue_.empty(); });
      if (shutting_down_) return;
      job = queue_.front();
      queue_.pop_front();
      running_ = true;
      stop_running_ = false;
    }
    auto update = [&](const std::function<void(Progress&)>& change) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& p : progress_) {
        if (p.id == job.id) change(p);
      }
    };
    update([](Progress& p) { p.status = "running"; });
    RunCallbacks callbacks;
    const bool threads = job.config.mode != "processes";
    callbacks.on_step = [&](const StepRecord& record) {
      update([&](Progress& p) {
        p.step = record.step + 1;
        p.loss = record.loss;
      });
      if (threads && stop_running_) throw StoppedByUser();
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
    std::string status = "done", failure;
    try {
      RunSummary summary = run_training(job.config, callbacks);
      finished.trace = std::move(summary.trace);
      if (!summary.ok) {
        status =
            summary.failure.find("stopped by the user") != std::string::npos ? "stopped" : "failed";
        failure = summary.failure;
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
        finished.label = p.label;
      }
      if (!finished.trace.ranks.empty()) finished_.push_back(std::move(finished));
      running_ = false;
    }
  }
}

}  // namespace shardscope::gui
