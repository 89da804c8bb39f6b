#pragma once

#include <nlohmann/json.hpp>

#include "profiling/trace/run_record.h"

namespace shardscope::profiling {

// run_record.h's conversions on JSON values, for code that embeds a record in a larger document
// (a Chrome trace's otherData, `run --json` with the engine's config beside the result).
RunRecord run_record_of(const nlohmann::json& run);
nlohmann::json run_record_json(const RunRecord& run);
RunResult run_result_of(const nlohmann::json& result);
nlohmann::json run_result_json(const RunResult& result);

}  // namespace shardscope::profiling
