// libFuzzer target for the trace readers (scripts/fuzz.sh builds and runs it). Whatever the
// bytes, a reader either returns a trace or throws TraceFormatError; anything else (another
// exception, a crash, a sanitizer report, a hang) is a bug. A trace that was read must also
// write and read back in both formats.
#include <cstddef>
#include <cstdint>
#include <string>

#include "profiling/io/trace_io.h"
#include "profiling/trace/trace.h"

#ifndef SHARDSCOPE_FUZZ_FORMAT
#error "define SHARDSCOPE_FUZZ_FORMAT as 0 (native) or 1 (Chrome JSON)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardscope::profiling;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  Trace trace;
  try {
    trace = SHARDSCOPE_FUZZ_FORMAT == 0 ? from_native(bytes) : from_chrome_json(bytes);
  } catch (const TraceFormatError&) {
    return 0;  // the answer to bad input
  }
  // What was read is a valid trace: it round-trips through both writers.
  const Trace native = from_native(to_native(trace));
  const Trace json = from_chrome_json(to_chrome_json(trace));
  if (native.event_count() != trace.event_count() || json.event_count() != trace.event_count()) {
    __builtin_trap();
  }
  return 0;
}
