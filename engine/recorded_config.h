#pragma once

#include <optional>

#include "engine/config.h"
#include "profiling/run_record.h"

namespace shardscope {

// The configuration a trace recorded (RunRecord::config_json), or nothing for a trace without
// one or with one this version cannot read (another version's, a foreign tool's).
std::optional<Config> recorded_config(const profiling::RunRecord& run);

}  // namespace shardscope
