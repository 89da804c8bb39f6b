// The top level of a Chrome trace, walked by hand, and its pieces parsed by simdjson. A whole
// document parsed at once would need an index four bytes to every structural character (more
// than the file again); the walk below only finds where each member and each batch of events
// ends, and simdjson validates and parses every piece, so that the file is checked as a whole
// is: the pieces tile it, and between them stand only white space, colons, commas and brackets.
#include "profiling/io/chrome_json_scan.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>

#include "profiling/io/trace_io.h"

namespace shardscope::profiling::chrome_json {
namespace {

// Events are parsed in batches of about this many bytes: simdjson's index and tape for one
// batch stay in the cache, and the parser's memory stays small.
constexpr size_t kBatchBytes = 512 << 10;

// Deep enough for anything nlohmann read (which had no limit) short of hostile input; simdjson's
// default stops at 1024.
constexpr size_t kMaxDepth = 1 << 20;

[[noreturn]] void not_json(size_t at) {
  throw TraceFormatError("not valid JSON (truncated or corrupt?) at byte " + std::to_string(at));
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Where things end, by brackets and quotes alone. On valid JSON it is exact; on anything else
// the piece it delimits fails to parse, or a separator is not where it must be.
class Bounds {
 public:
  explicit Bounds(std::string_view text) : s_(text.data()), n_(text.size()) {}

  char at(size_t i) const { return i < n_ ? s_[i] : '\0'; }
  size_t size() const { return n_; }
  size_t skip_space(size_t i) const {
    while (i < n_ && is_space(s_[i])) ++i;
    return i;
  }
  // One past the closing quote of the string whose opening quote is at `i`.
  size_t string_end(size_t i) const {
    for (++i; i < n_; ++i) {
      if (s_[i] == '"') return i + 1;
      if (s_[i] == '\\') ++i;
    }
    not_json(n_);
  }
  // One past the value that starts at `i`.
  size_t value_end(size_t i) const {
    const char c = at(i);
    if (c == '"') return string_end(i);
    if (c != '{' && c != '[') {
      size_t end = i;
      while (end < n_ && !is_space(s_[end]) && s_[end] != ',' && s_[end] != ']' && s_[end] != '}' &&
             s_[end] != ':') {
        ++end;
      }
      if (end == i) not_json(i);
      return end;
    }
    size_t depth = 0;
    for (; i < n_; ++i) {
      switch (s_[i]) {
        case '"':
          i = string_end(i) - 1;
          break;
        case '{':
        case '[':
          ++depth;
          break;
        case '}':
        case ']':
          if (--depth == 0) return i + 1;
          break;
        default:
          break;
      }
    }
    not_json(n_);
  }

 private:
  const char* s_;
  size_t n_;
};

// Parses pieces of the text, each on its own, in one reused padded buffer.
class Pieces {
 public:
  // The value text[begin, end). Integers past 64 bits, which simdjson refuses, are read as
  // nlohmann read them (as floats): the piece is rewritten by nlohmann and parsed again. Not
  // JSON: an error at byte `begin`.
  simdjson::dom::element parse(std::string_view text, size_t begin, size_t end) {
    const std::string_view piece = text.substr(begin, end - begin);
    auto result = parse_copy(piece, false);
    if (!result.error()) return result.value_unsafe();
    if (result.error() == simdjson::NUMBER_ERROR) {
      std::string again;
      try {
        again = nlohmann::json::parse(piece.begin(), piece.end()).dump();
      } catch (const nlohmann::json::exception&) {
        not_json(begin);
      }
      result = parse_copy(again, false);
      if (!result.error()) return result.value_unsafe();
    }
    not_json(begin);
  }
  // The array of the values and commas in `piece`, or an error without a fallback: a batch of
  // events, whose failure is looked at event by event.
  simdjson::simdjson_result<simdjson::dom::element> try_batch(std::string_view piece) {
    return parse_copy(piece, true);
  }

 private:
  simdjson::simdjson_result<simdjson::dom::element> parse_copy(std::string_view piece, bool wrap) {
    if (!allocated_) {
      if (parser_.allocate(2 * kBatchBytes, kMaxDepth)) throw std::bad_alloc();
      allocated_ = true;
    }
    const size_t len = piece.size() + (wrap ? 2 : 0);
    if (capacity_ < len + simdjson::SIMDJSON_PADDING) {
      capacity_ = std::max(len + simdjson::SIMDJSON_PADDING, 2 * capacity_);
      buffer_ = std::make_unique<char[]>(capacity_);
    }
    char* out = buffer_.get();
    if (wrap) *out++ = '[';
    std::memcpy(out, piece.data(), piece.size());
    if (wrap) out[piece.size()] = ']';
    std::memset(buffer_.get() + len, ' ', simdjson::SIMDJSON_PADDING);
    return parser_.parse(buffer_.get(), len, /*realloc_if_needed=*/false);
  }

  simdjson::dom::parser parser_;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  bool allocated_ = false;
};

class Scan {
 public:
  Scan(const std::string& text, const std::function<void(simdjson::dom::object)>& on_event)
      : text_(text), b_(text), on_event_(on_event) {}

  Document run() {
    // nlohmann skipped a UTF-8 byte order mark.
    size_t i = b_.skip_space(text_.rfind("\xef\xbb\xbf", 0) == 0 ? 3 : 0);
    if (b_.at(i) != '{') {
      if (b_.at(i) == '[' || scalar_token(i)) {
        throw TraceFormatError("not a Chrome trace: no traceEvents array");
      }
      not_json(i);
    }
    i = b_.skip_space(i + 1);
    while (b_.at(i) != '}') {
      if (b_.at(i) != '"') not_json(i);
      const size_t key_end = b_.string_end(i);
      std::string_view key;
      if (pieces_.parse(text_, i, key_end).get(key)) not_json(i);
      const bool events = key == "traceEvents", other = key == "otherData";
      const bool kineto = key == "distributedInfo" || key == "baseTimeNanoseconds" ||
                          key == "schemaVersion" || key == "deviceProperties";
      const std::string name(key);
      i = b_.skip_space(key_end);
      if (b_.at(i) != ':') not_json(i);
      i = b_.skip_space(i + 1);
      const size_t value = i;
      i = b_.skip_space(events && b_.at(i) == '[' ? events_end(i) : member_end(i, other));
      if (kineto) keep_kineto(name, value);
      if (b_.at(i) == '}') break;
      if (b_.at(i) != ',') not_json(i);
      i = b_.skip_space(i + 1);
      if (b_.at(i) == '}') not_json(i);
    }
    i = b_.skip_space(i + 1);
    // nlohmann, the parser before, took a NUL byte for the end of the input: a file padded with
    // zeros after its JSON still opens.
    if (i != b_.size() && text_[i] != '\0') not_json(i);
    return std::move(doc_);
  }

 private:
  // A member other than the events, validated; otherData (an object) kept.
  size_t member_end(size_t i, bool other) {
    const size_t end = b_.value_end(i);
    if (other && b_.at(i) == '{') {
      try {
        doc_.other = nlohmann::json::parse(text_.begin() + i, text_.begin() + end);
      } catch (const nlohmann::json::exception&) {
        not_json(i);
      }
    } else {
      pieces_.parse(text_, i, end);
    }
    return end;
  }

  // A Kineto member (small: a few objects and numbers), kept as nlohmann reads it.
  void keep_kineto(const std::string& key, size_t i) {
    const size_t end = b_.value_end(i);
    try {
      doc_.kineto[key] = nlohmann::json::parse(text_.begin() + i, text_.begin() + end);
    } catch (const nlohmann::json::exception&) {
      not_json(i);
    }
  }

  // The traceEvents array at `i`, its events handed on a batch at a time; one past its end.
  size_t events_end(size_t i) {
    if (doc_.saw_events) throw TraceFormatError("more than one traceEvents array");
    doc_.saw_events = true;
    i = b_.skip_space(i + 1);
    if (b_.at(i) == ']') return i + 1;
    size_t batch = i, last = i;
    for (bool more = true; more;) {
      try {
        i = next_event(i, &last, &more);
      } catch (const TraceFormatError&) {
        flush(batch, last);  // the events before the break first, as a streaming parser would
        throw;
      }
      if (!more || last - batch >= kBatchBytes) {
        flush(batch, last);
        batch = last = i;
      }
    }
    return i;
  }

  // Past the event at `i` (which ends at `last`) and the comma after it (`more`), or the array's
  // closing bracket.
  size_t next_event(size_t i, size_t* last, bool* more) {
    if (b_.at(i) != '{') {
      // An array is no event as soon as it opens, a scalar once it has been read (as nlohmann
      // said, which read a token at a time).
      if (b_.at(i) == '[' || scalar_token(i))
        throw TraceFormatError("trace event is not an object");
      not_json(i);
    }
    *last = b_.value_end(i);
    i = b_.skip_space(*last);
    *more = b_.at(i) == ',';
    if (!*more && b_.at(i) != ']') not_json(i);
    return *more ? b_.skip_space(i + 1) : i + 1;
  }

  // Whether a string, number or literal starts at `i`, whatever follows it.
  bool scalar_token(size_t i) {
    const char c = b_.at(i);
    if (c == '"') return pieces_.parse(text_, i, b_.string_end(i)).is_string();
    for (std::string_view literal : {"true", "false", "null"}) {
      if (c == literal[0]) return std::string_view(text_).substr(i, literal.size()) == literal;
    }
    // A number: the longest prefix that follows the grammar, and one a double can hold.
    auto is_digit = [&](size_t j) { return b_.at(j) >= '0' && b_.at(j) <= '9'; };
    auto digits = [&](size_t j) {
      while (is_digit(j)) ++j;
      return j;
    };
    size_t end = c == '-' ? i + 1 : i;
    if (!is_digit(end)) return false;
    end = b_.at(end) == '0' ? end + 1 : digits(end);
    if (b_.at(end) == '.') {
      if (!is_digit(++end)) return false;
      end = digits(end);
    }
    if (b_.at(end) == 'e' || b_.at(end) == 'E') {
      if (b_.at(++end) == '+' || b_.at(end) == '-') ++end;
      if (!is_digit(end)) return false;
      end = digits(end);
    }
    pieces_.parse(text_, i, end);
    return true;
  }

  // The events in text[begin, end): parsed together, or (when that fails) one at a time, so
  // that the events before a broken one are read first, as a streaming parser would.
  void flush(size_t begin, size_t end) {
    if (begin == end) return;
    simdjson::dom::array all;
    if (!pieces_.try_batch(std::string_view(text_).substr(begin, end - begin)).get(all)) {
      for (simdjson::dom::element e : all) hand_on(e);
      return;
    }
    size_t i = begin;
    while (i < end) {
      const size_t event_end = b_.value_end(i);
      hand_on(pieces_.parse(text_, i, event_end));
      i = b_.skip_space(b_.skip_space(event_end) + 1);  // past the comma
    }
  }

  void hand_on(simdjson::dom::element e) {
    simdjson::dom::object object;
    if (e.get(object)) throw TraceFormatError("trace event is not an object");
    on_event_(object);
  }

  const std::string& text_;
  Bounds b_;
  const std::function<void(simdjson::dom::object)>& on_event_;
  Pieces pieces_;
  Document doc_;
};

}  // namespace

Document scan(const std::string& text, const std::function<void(simdjson::dom::object)>& on_event) {
  return Scan(text, on_event).run();
}

}  // namespace shardscope::profiling::chrome_json
