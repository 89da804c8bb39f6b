#pragma once

#include <stdexcept>
#include <string>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// A trace file that cannot be read: truncated, corrupt, hostile or not a trace. The message
// says what is wrong and where.
class TraceFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Chrome Trace Event Format (opens in Perfetto UI and chrome://tracing): a process per rank
// (pid rank + 1), a thread per lane with the comm lane one thread per concurrency slot
// (chrome_tracks.h), X events, C counters for memory, flow arrows linking each call across
// ranks (comm_links.h); everything needed to read it back is in the events' args, the
// process and thread metadata and otherData. The reader also reads files written before the
// slots (pid = rank, tid = lane).
std::string to_chrome_json(const Trace& trace);
Trace from_chrome_json(const std::string& text);

// The native format: versioned header, payload checksum, fixed-size event records.
std::string to_native(const Trace& trace);
Trace from_native(const std::string& bytes);

// Whichever of the two `bytes` is (the native magic, else JSON).
Trace parse_trace(const std::string& bytes);
// By file name: ".json" writes Chrome JSON, anything else the native format.
std::string serialise_trace(const Trace& trace, const std::string& path);
Trace read_trace_file(const std::string& path);

}  // namespace shardscope::profiling
