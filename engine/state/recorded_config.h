#pragma once

#include <optional>

#include "engine/train/config.h"
#include "profiling/trace/run_record.h"

namespace shardscope {

// The configuration a trace recorded (RunRecord::config_json), or nothing for a trace without
// one or with one this version cannot read (another version's, a foreign tool's).
std::optional<Config> recorded_config(const profiling::RunRecord& run);

}  // namespace shardscope
