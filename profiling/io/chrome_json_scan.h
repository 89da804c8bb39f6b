#pragma once

#include <functional>
#include <string>

#include <simdjson.h>
#include <nlohmann/json.hpp>

// The JSON half of the Chrome trace reader: finds the top level's members and parses the events
// with simdjson a batch at a time, so that a file of a million events costs its own bytes and a
// few megabytes more, never an index of the whole document.
namespace shardscope::profiling::chrome_json {

// What a Chrome trace holds beside its events.
struct Document {
  bool saw_events = false;  // a traceEvents array
  // The last otherData object, read by nlohmann as before: its `run` is kept as nlohmann writes
  // it, and the writer reads it back that way.
  nlohmann::json other = nlohmann::json::object();
  // What the PyTorch profiler (Kineto) writes at the top level beside its events, when present:
  // distributedInfo, baseTimeNanoseconds, schemaVersion, deviceProperties.
  nlohmann::json kineto = nlohmann::json::object();
};

// Reads `text`, a JSON object, handing every element of its traceEvents array to `on_event` in
// the order of the file. Every byte is validated as JSON (UTF-8, numbers, structure), with
// nlohmann's answers where the two parsers differ (an integer past 64 bits is a float).
// Throws TraceFormatError: not JSON ("not valid JSON (truncated or corrupt?) at byte N"), not a
// Chrome trace, an event that is not an object, or whatever `on_event` throws.
Document scan(const std::string& text, const std::function<void(simdjson::dom::object)>& on_event);

}  // namespace shardscope::profiling::chrome_json
