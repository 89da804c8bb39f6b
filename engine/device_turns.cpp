#include "engine/device_turns.h"

#include "profiling/host_tracing.h"

namespace shardscope {
namespace {

thread_local bool holds_turn = false;

}  // namespace

DeviceTurns& DeviceTurns::instance() {
  static DeviceTurns turns;
  return turns;
}

void DeviceTurns::acquire() {
  // Only the wait is a span: it is the time this rank's device would not have made it wait.
  {
    profiling::ScopedSpan waiting(profiling::Category::kWait, kWaitName);
    device_.lock();
  }
  holds_turn = true;
}

void DeviceTurns::release() {
  holds_turn = false;
  device_.unlock();
}

DeviceTurns::Scope::Scope(bool enabled) {
  if (!enabled || holds_turn) return;
  instance().acquire();
  held_ = true;
}

DeviceTurns::Scope::~Scope() {
  if (held_) instance().release();
}

DeviceTurns::Release::Release() {
  if (!holds_turn) return;
  instance().release();
  released_ = true;
}

DeviceTurns::Release::~Release() {
  if (released_) instance().acquire();
}

}  // namespace shardscope
