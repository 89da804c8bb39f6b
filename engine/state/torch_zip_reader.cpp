#include "engine/state/torch_zip_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <variant>

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include "engine/state/weights_file.h"
#include "engine/state/zip_checksums.h"

namespace shardscope {
namespace {

// One value on the pickle machine's stack. Containers are shared, as in Python: SETITEMS fills
// the dict that the memo and the stack both refer to.
struct Value;
using ValuePtr = std::shared_ptr<Value>;
struct Global {
  std::string module, name;
  std::string text() const { return module + "." + name; }
};
struct Tuple {
  std::vector<ValuePtr> items;
};
struct List {
  std::vector<ValuePtr> items;
};
struct Dict {
  std::vector<std::pair<ValuePtr, ValuePtr>> items;  // in insertion order
};
struct Storage {
  torch::Tensor flat;  // 1-D, the storage's dtype
};
struct Value {
  std::variant<std::monostate, bool, int64_t, double, std::string, Global, Tuple, List, Dict,
               Storage, torch::Tensor>
      v;
};

template <typename T>
ValuePtr make(T value) {
  auto out = std::make_shared<Value>();
  out->v = std::move(value);
  return out;
}

torch::ScalarType storage_dtype(const std::string& type) {
  static const std::map<std::string, torch::ScalarType> types = {
      {"torch.FloatStorage", torch::kFloat},
      {"torch.DoubleStorage", torch::kDouble},
      {"torch.HalfStorage", torch::kHalf},
      {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kLong},
      {"torch.IntStorage", torch::kInt},
      {"torch.ShortStorage", torch::kShort},
      {"torch.CharStorage", torch::kChar},
      {"torch.ByteStorage", torch::kByte},
      {"torch.BoolStorage", torch::kBool},
      {"torch.ComplexFloatStorage", torch::kComplexFloat},
      {"torch.ComplexDoubleStorage", torch::kComplexDouble}};
  auto it = types.find(type);
  if (it == types.end()) throw WeightsFileError("a storage of unknown type " + type);
  return it->second;
}

// A record whose bytes do not match the CRC-32 the zip declares for it was changed on disk.
void check_record_checksum(const std::map<std::string, uint32_t>& checksums,
                           const std::string& record, const void* data, size_t size) {
  const auto found = checksums.find(record);
  if (found == checksums.end())
    throw WeightsFileError("the record " + record + " is not in the zip's directory");
  if (crc32_of(data, size) != found->second)
    throw WeightsFileError("the record " + record +
                           " does not match its CRC-32 (the file is corrupted)");
}

class PickleMachine {
 public:
  PickleMachine(const std::string& pickle, caffe2::serialize::PyTorchStreamReader& zip,
                const std::map<std::string, uint32_t>& checksums)
      : data_(pickle), zip_(zip), checksums_(checksums) {}

  // Runs the pickle to its STOP and returns the value it leaves.
  ValuePtr run() {
    while (true) {
      const char op = read<char>();
      if (op == '.') {  // STOP
        if (stack_.size() != 1)
          fail("the pickle ends with " + std::to_string(stack_.size()) + " values");
        return stack_.back();
      }
      // Each kind of opcode has its handler, which says whether `op` is of its kind.
      if (!stack_op(op) && !push_scalar(op) && !build_container(op) && !build_object(op))
        fail_unknown(op);
    }
  }

  [[noreturn]] static void fail(const std::string& why) { throw WeightsFileError(why); }

 private:
  // Framing, marks, the memo and POP.
  bool stack_op(char op) {
    switch (op) {
      case '\x80':  // PROTO
        read<uint8_t>();
        return true;
      case '\x95':  // FRAME (protocol 4): a length hint
        read<uint64_t>();
        return true;
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return true;
      case 'q':  // BINPUT
        memo(read<uint8_t>());
        return true;
      case 'r':  // LONG_BINPUT
        memo(read<uint32_t>());
        return true;
      case '\x94':  // MEMOIZE (protocol 4)
        memo(memo_.size());
        return true;
      case 'h':  // BINGET
        push(recall(read<uint8_t>()));
        return true;
      case 'j':  // LONG_BINGET
        push(recall(read<uint32_t>()));
        return true;
      case '0':  // POP
        pop();
        return true;
      default:
        return false;
    }
  }

  // None, booleans, integers, floats and strings.
  bool push_scalar(char op) {
    switch (op) {
      case 'N':
        push(make(std::monostate{}));
        return true;
      case '\x88':
        push(make(true));
        return true;
      case '\x89':
        push(make(false));
        return true;
      case 'K':  // BININT1
        push(make<int64_t>(read<uint8_t>()));
        return true;
      case 'M':  // BININT2
        push(make<int64_t>(read<uint16_t>()));
        return true;
      case 'J':  // BININT
        push(make<int64_t>(read<int32_t>()));
        return true;
      case '\x8a':  // LONG1
        push(make(read_long(read<uint8_t>())));
        return true;
      case 'G':  // BINFLOAT
        push(make(read_big_endian_double()));
        return true;
      case 'X':  // BINUNICODE
        push(make(read_bytes(read<uint32_t>())));
        return true;
      case '\x8c':  // SHORT_BINUNICODE
        push(make(read_bytes(read<uint8_t>())));
        return true;
      case '\x8d':  // BINUNICODE8
        push(make(read_bytes(read<uint64_t>())));
        return true;
      default:
        return false;
    }
  }

  // Tuples, lists and dicts, and what fills them.
  bool build_container(char op) {
    switch (op) {
      case ')':
        push(make(Tuple{}));
        return true;
      case 't':
        push(make(Tuple{pop_to_mark()}));
        return true;
      case '\x85':
        push(make(Tuple{pop_n(1)}));
        return true;
      case '\x86':
        push(make(Tuple{pop_n(2)}));
        return true;
      case '\x87':
        push(make(Tuple{pop_n(3)}));
        return true;
      case ']':
        push(make(List{}));
        return true;
      case 'l':
        push(make(List{pop_to_mark()}));
        return true;
      case 'a': {  // APPEND
        ValuePtr item = pop();
        list_at(top())->items.push_back(item);
        return true;
      }
      case 'e': {  // APPENDS
        std::vector<ValuePtr> items = pop_to_mark();
        auto& list = list_at(top())->items;
        list.insert(list.end(), items.begin(), items.end());
        return true;
      }
      case '}':
        push(make(Dict{}));
        return true;
      case 'd': {  // DICT
        ValuePtr dict = make(Dict{});
        set_items(dict, pop_to_mark());
        push(dict);
        return true;
      }
      case 's': {  // SETITEM
        ValuePtr value = pop(), key = pop();
        set_items(top(), {key, value});
        return true;
      }
      case 'u': {  // SETITEMS
        std::vector<ValuePtr> items = pop_to_mark();
        set_items(top(), items);
        return true;
      }
      default:
        return false;
    }
  }

  // Globals, persistent ids (storages) and calls (REDUCE, BUILD).
  bool build_object(char op) {
    switch (op) {
      case 'c': {  // GLOBAL: "module\nname\n"
        std::string module = read_line(), name = read_line();
        push(make(Global{module, name}));
        return true;
      }
      case '\x93': {  // STACK_GLOBAL (protocol 4)
        std::string name = as_string(pop()), module = as_string(pop());
        push(make(Global{module, name}));
        return true;
      }
      case 'Q':  // BINPERSID
        push(persistent_load(pop()));
        return true;
      case 'R': {  // REDUCE
        ValuePtr args = pop(), callable = pop();
        push(reduce(callable, args));
        return true;
      }
      case 'b':  // BUILD: attributes set on the object below (an OrderedDict's _metadata,
                 // a tensor's python attributes): not weights, so dropped.
        pop();
        top();
        return true;
      default:
        return false;
    }
  }

  [[noreturn]] static void fail_unknown(char op) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", static_cast<unsigned char>(op));
    fail(std::string("it holds a pickled Python object (pickle opcode ") + hex +
         "), not a name -> tensor dict: save model.state_dict(), not the model");
  }

  template <typename T>
  T read() {
    if (data_.size() - pos_ < sizeof(T)) fail("the pickle ends early (truncated)");
    T value;
    std::memcpy(&value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string read_bytes(uint64_t n) {
    if (data_.size() - pos_ < n) fail("the pickle ends early (truncated)");
    std::string out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  std::string read_line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) fail("the pickle ends early (truncated)");
    std::string out = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  int64_t read_long(uint8_t n) {
    if (n > 8) fail("an integer of " + std::to_string(n) + " bytes");
    const std::string bytes = read_bytes(n);
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(bytes[n - 1]) & 0x80))
      v |= ~uint64_t{0} << (8 * n);  // two's complement sign extension
    return static_cast<int64_t>(v);
  }
  double read_big_endian_double() {
    std::string bytes = read_bytes(8);
    std::reverse(bytes.begin(), bytes.end());
    double v;
    std::memcpy(&v, bytes.data(), 8);
    return v;
  }

  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  ValuePtr pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      fail("the pickle pops an empty stack (corrupt)");
    ValuePtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  const ValuePtr& top() {
    if (stack_.empty()) fail("the pickle reads an empty stack (corrupt)");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_n(size_t n) {
    std::vector<ValuePtr> out(n);
    for (size_t i = n; i-- > 0;) out[i] = pop();
    return out;
  }
  std::vector<ValuePtr> pop_to_mark() {
    if (marks_.empty()) fail("the pickle has no MARK (corrupt)");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> out(stack_.begin() + mark, stack_.end());
    stack_.resize(mark);
    return out;
  }
  void memo(size_t id) { memo_[id] = top(); }
  ValuePtr recall(size_t id) {
    auto it = memo_.find(id);
    if (it == memo_.end())
      fail("the pickle recalls memo " + std::to_string(id) + " it never stored");
    return it->second;
  }

  static std::string as_string(const ValuePtr& v) {
    if (auto* s = std::get_if<std::string>(&v->v)) return *s;
    fail("expected a string in the pickle");
  }
  static int64_t as_int(const ValuePtr& v) {
    if (auto* i = std::get_if<int64_t>(&v->v)) return *i;
    fail("expected an integer in the pickle");
  }
  static const std::vector<ValuePtr>& as_tuple(const ValuePtr& v) {
    if (auto* t = std::get_if<Tuple>(&v->v)) return t->items;
    fail("expected a tuple in the pickle");
  }
  static List* list_at(const ValuePtr& v) {
    if (auto* l = std::get_if<List>(&v->v)) return l;
    fail("the pickle appends to something that is not a list");
  }
  static std::vector<int64_t> int_list(const ValuePtr& v) {
    std::vector<int64_t> out;
    for (const auto& item : as_tuple(v)) out.push_back(as_int(item));
    return out;
  }
  static void set_items(const ValuePtr& target, const std::vector<ValuePtr>& items) {
    auto* dict = std::get_if<Dict>(&target->v);
    if (dict == nullptr || items.size() % 2 != 0)
      fail("the pickle sets items on something that is not a dict");
    for (size_t i = 0; i < items.size(); i += 2) {
      const auto* key = std::get_if<std::string>(&items[i]->v);
      bool replaced = false;
      for (auto& [k, v] : dict->items) {
        const auto* existing = std::get_if<std::string>(&k->v);
        if (key != nullptr && existing != nullptr && *key == *existing) {
          v = items[i + 1];
          replaced = true;
        }
      }
      if (!replaced) dict->items.emplace_back(items[i], items[i + 1]);
    }
  }

  // ('storage', storage type, key, location, numel): the record data/<key> of the zip.
  ValuePtr persistent_load(const ValuePtr& pid) {
    const auto& t = as_tuple(pid);
    if (t.size() != 5 || as_string(t[0]) != "storage")
      fail("a persistent id that is not a storage");
    const auto* type = std::get_if<Global>(&t[1]->v);
    if (type == nullptr) fail("a storage without a type");
    const std::string key = as_string(t[2]);
    if (auto it = storages_.find(key); it != storages_.end()) return it->second;
    const torch::ScalarType dtype = storage_dtype(type->text());
    const int64_t numel = as_int(t[4]);
    const std::string record = "data/" + key;
    if (!zip_.hasRecord(record)) fail("the storage record " + record + " is missing");
    const size_t bytes = zip_.getRecordSize(record);
    if (numel < 0 || bytes != static_cast<size_t>(numel) * c10::elementSize(dtype))
      fail("the storage record " + record + " has " + std::to_string(bytes) + " bytes, not " +
           std::to_string(numel) + " elements");
    torch::Tensor flat = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
    if (bytes > 0) zip_.getRecord(record, flat.data_ptr(), bytes);
    check_record_checksum(checksums_, record, flat.data_ptr(), bytes);
    return storages_[key] = make(Storage{flat});
  }

  ValuePtr reduce(const ValuePtr& callable, const ValuePtr& args) {
    const auto* global = std::get_if<Global>(&callable->v);
    if (global == nullptr) fail("the pickle calls something that is not a global");
    const std::string name = global->text();
    const auto& a = as_tuple(args);
    if (name == "collections.OrderedDict") return make(Dict{});
    if (name == "torch._utils._rebuild_tensor_v2" && a.size() >= 5) {
      const auto* storage = std::get_if<Storage>(&a[0]->v);
      if (storage == nullptr) fail("a tensor without a storage");
      const int64_t offset = as_int(a[1]);
      const std::vector<int64_t> size = int_list(a[2]), stride = int_list(a[3]);
      if (size.size() != stride.size()) fail("a tensor whose size and stride differ in rank");
      // The last element it reaches must lie inside the storage.
      int64_t last = offset;
      bool empty = false;
      for (size_t d = 0; d < size.size(); ++d) {
        if (size[d] < 0 || stride[d] < 0) fail("a tensor of negative size or stride");
        empty = empty || size[d] == 0;
        last += (size[d] - 1) * stride[d];
      }
      if (!empty && (offset < 0 || last >= storage->flat.numel()))
        fail("a tensor reaches past the end of its storage (corrupt)");
      if (empty) return make(torch::empty(size, storage->flat.options()));
      return make(storage->flat.as_strided(size, stride, offset));
    }
    if (name == "torch._utils._rebuild_parameter" && !a.empty()) {
      if (std::holds_alternative<torch::Tensor>(a[0]->v)) return a[0];
    }
    fail("it holds a Python object (" + name + "), not only a name -> tensor dict");
  }

  const std::string& data_;
  caffe2::serialize::PyTorchStreamReader& zip_;
  const std::map<std::string, uint32_t>& checksums_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<size_t, ValuePtr> memo_;
  std::map<std::string, ValuePtr> storages_;
};

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

}  // namespace

std::string torch_zip_problem(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    const std::map<std::string, uint32_t> checksums = zip_record_checksums(path);
    for (const std::string& record : zip.getAllRecords()) {
      auto [data, size] = zip.getRecord(record);
      check_record_checksum(checksums, record, data.get(), size);
    }
    return "";
  } catch (const WeightsFileError& e) {
    return e.what();
  } catch (const c10::Error& e) {
    return "not a readable PyTorch file (truncated or corrupt?): " +
           first_line(e.what_without_backtrace());
  }
}

NamedTensors read_torch_zip(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    if (!zip.hasRecord("data.pkl")) throw WeightsFileError("no data.pkl record");
    const std::map<std::string, uint32_t> checksums = zip_record_checksums(path);
    auto [pickle_data, pickle_size] = zip.getRecord("data.pkl");
    check_record_checksum(checksums, "data.pkl", pickle_data.get(), pickle_size);
    const std::string pickle(static_cast<const char*>(pickle_data.get()), pickle_size);
    PickleMachine machine(pickle, zip, checksums);
    const ValuePtr root = machine.run();
    const auto* dict = std::get_if<Dict>(&root->v);
    if (dict == nullptr) {
      throw WeightsFileError(
          "it is not a name -> tensor dict (save model.state_dict(), not the model)");
    }
    NamedTensors out;
    for (const auto& [key, value] : dict->items) {
      const auto* name = std::get_if<std::string>(&key->v);
      if (name == nullptr) throw WeightsFileError("a key of its dict is not a name (string)");
      const auto* tensor = std::get_if<torch::Tensor>(&value->v);
      if (tensor == nullptr) {
        throw WeightsFileError("entry '" + *name +
                               "' is not a tensor (a nested dict? save model.state_dict())");
      }
      out.emplace_back(*name, *tensor);
    }
    return out;
  } catch (const WeightsFileError& e) {
    throw WeightsFileError(path + ": " + e.what());
  } catch (const c10::Error& e) {  // the zip container itself
    throw WeightsFileError(path + " is not a readable PyTorch file (truncated or corrupt?): " +
                           first_line(e.what_without_backtrace()));
  }
}

}  // namespace shardscope
