#include "engine/train/memory_formula_hook.h"

namespace shardscope {
namespace {

MemoryFormula& registered() {
  static MemoryFormula formula;
  return formula;
}

}  // namespace

void set_memory_formula(MemoryFormula formula) {
  registered() = std::move(formula);
}

const MemoryFormula& memory_formula_hook() {
  return registered();
}

}  // namespace shardscope
