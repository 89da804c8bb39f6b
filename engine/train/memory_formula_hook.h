#pragma once

#include <functional>

#include "engine/train/config.h"
#include "profiling/trace/trace.h"

namespace shardscope {

// The memory formula's bytes per category for a rank of a run. How each strategy lays out its
// memory is the strategies' knowledge (strategies/common/memory_formula.cpp registers it at
// start-up); the engine only asks, so that `run --json` and the trace carry the formula beside what
// was measured.
using MemoryFormula = std::function<profiling::MemoryCategories(const Config&, int rank)>;
void set_memory_formula(MemoryFormula formula);
// Empty until registered.
const MemoryFormula& memory_formula_hook();

}  // namespace shardscope
