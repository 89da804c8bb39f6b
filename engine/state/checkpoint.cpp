#include "engine/state/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <torch/serialize.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "engine/model/gpt_model.h"
#include "engine/state/atomic_file.h"
#include "engine/state/checkpoint_retention.h"
#include "engine/state/hashing.h"
#include "engine/state/torch_zip_reader.h"

namespace shardscope {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "shardscope-checkpoint";
constexpr int kVersion = 1;

bool is_directory(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

void make_directories(const std::string& path) {
  for (size_t slash = 1; slash != std::string::npos;) {
    slash = path.find('/', slash + 1);
    const std::string prefix = path.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot create checkpoint directory " + prefix + ": " +
                               std::strerror(errno));
    }
  }
  if (!is_directory(path)) throw std::runtime_error(path + " is not a directory");
}

bool read_bytes(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

std::string checksum_text(const std::string& bytes) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(fnv1a(bytes.data(), bytes.size())));
  return text;
}

std::string shard_name(int rank) {
  return "rank-" + std::to_string(rank) + ".ckpt";
}

// Steps of the step-NNNNNN folders under `root`, newest first.
std::vector<int> saved_steps(const std::string& root) {
  std::vector<int> steps;
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) return steps;
  while (const dirent* entry = readdir(dir)) {
    if (const auto step = checkpoint_folder_step(entry->d_name)) steps.push_back(*step);
  }
  closedir(dir);
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

// Reads and checks one step's folder; returns why it is not valid, or "" with `info` filled.
std::string inspect(const std::string& folder, CheckpointInfo& info) {
  std::string text;
  // A FIFO would block the read forever, a folder would throw from inside the stream.
  if (struct stat entry{};
      stat((folder + "/manifest.json").c_str(), &entry) == 0 && !S_ISREG(entry.st_mode))
    return "its manifest.json is not a regular file";
  if (!read_bytes(folder + "/manifest.json", text))
    return "it has no manifest (it was interrupted while being written)";
  json manifest = json::parse(text, nullptr, false);
  if (!manifest.is_object() || manifest.value("format", "") != kFormat)
    return "its manifest is not a shardscope checkpoint manifest";
  if (manifest.value("version", 0) != kVersion) {
    return "its manifest has version " + manifest.value("version", json(0)).dump() +
           "; this build reads version " + std::to_string(kVersion);
  }
  try {
    info.directory = folder;
    const int64_t step = manifest.at("step").get<int64_t>();
    if (step < 1 || step > 999999999) return "its manifest says step " + std::to_string(step);
    info.step = static_cast<int>(step);
    const int64_t world = manifest.at("world").get<int64_t>();
    if (world < 1 || world > (1 << 20)) return "its manifest says world " + std::to_string(world);
    info.world = static_cast<int>(world);
    // A manifest is data from disk: its numbers and names are checked before anything trusts
    // them (a resumed run starts at its step; its file names are opened in this folder).
    if (info.step < 1) return "its manifest says step " + std::to_string(info.step);
    const std::string base = folder.substr(folder.rfind('/') + 1);
    if (base.rfind("step-", 0) == 0 && base != checkpoint_step_directory("", info.step).substr(1))
      return "its manifest says step " + std::to_string(info.step) + ", its folder " + base;
    info.strategy = manifest.at("strategy").get<std::string>();
    // The configuration it was trained with, as this build reads one (check_resumable compares
    // its fields).
    try {
      info.config_json = to_json(config_from_json(manifest.at("config"))).dump();
    } catch (const ConfigError& e) {
      return std::string("its manifest's config is not a configuration: ") + e.what();
    }
    info.shards.clear();
    for (const json& shard : manifest.at("shards")) {
      const std::string file = shard.at("file").get<std::string>();
      if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos ||
          file.find('\0') != std::string::npos)
        return "its manifest names a file outside it ('" + file + "')";
      struct stat entry {};
      if (stat((folder + "/" + file).c_str(), &entry) == 0 && !S_ISREG(entry.st_mode))
        return file + " is not a file";
      std::string bytes;
      if (!read_bytes(folder + "/" + file, bytes)) return file + " is missing";
      if (static_cast<int64_t>(bytes.size()) != shard.at("bytes").get<int64_t>())
        return file + " has " + std::to_string(bytes.size()) + " bytes, the manifest says " +
               shard.at("bytes").dump();
      if (checksum_text(bytes) != shard.at("fnv1a").get<std::string>())
        return file + " does not match its checksum (corrupted)";
      // The manifest's checksum can be redone by whoever changed the shard; the zip's own
      // CRC-32s, and its being whole, are checked too.
      if (const std::string why = torch_zip_problem(folder + "/" + file); !why.empty())
        return file + ": " + why;
      info.shards.push_back(folder + "/" + file);
    }
  } catch (const json::exception& e) {
    return std::string("its manifest is malformed: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("it cannot be read: ") + e.what();
  }
  if (info.shards.empty()) return "its manifest lists no shards";
  return "";
}

}  // namespace

std::string checkpoint_step_directory(const std::string& root, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06d", step);
  return root + "/" + name;
}

std::string checkpoint_root_of(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return path;
  std::error_code ec;
  fs::path p = fs::path(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "dir/" names dir
  if (!fs::exists(p / "manifest.json", ec)) return path;
  const fs::path parent = p.parent_path();
  return parent.empty() ? "." : parent.string();
}

bool is_checkpoint_entry(const std::string& relative) {
  const std::string first = relative.substr(0, relative.find('/'));
  return first == "latest" || first == ".lock" || first.rfind("step-", 0) == 0;
}

void check_checkpoint_directory(const std::string& root) {
  try {
    make_directories(root);
  } catch (const std::exception& e) {
    throw ConfigError("checkpoint_dir", e.what());
  }
  if (access(root.c_str(), W_OK) != 0)
    throw ConfigError("checkpoint_dir", root + " is not writable: " + std::strerror(errno));
  check_step_folders_writable(root);
}

CheckpointDirectoryLock::CheckpointDirectoryLock(const std::string& root) {
  const std::string path = root + "/.lock";
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw ConfigError("checkpoint_dir", "cannot open " + path + ": " + std::strerror(errno));
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    std::string holder;
    read_bytes(path, holder);
    close(fd_);
    fd_ = -1;
    while (!holder.empty() && std::isspace(static_cast<unsigned char>(holder.back())))
      holder.pop_back();
    throw ConfigError("checkpoint_dir", root + " is in use by another run" +
                                            (holder.empty() ? "" : " (pid " + holder + ")") +
                                            "; give each run its own --checkpoint-dir");
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // Only the message to a second run lacks the pid; the lock itself holds.
  }
}

CheckpointDirectoryLock::~CheckpointDirectoryLock() {
  if (fd_ >= 0) close(fd_);
}

void write_checkpoint_shard(const std::string& root, int step, int rank,
                            const std::vector<StatePiece>& pieces) {
  const std::string folder = checkpoint_step_directory(root, step);
  make_directories(root);
  make_checkpoint_step_folder(folder);
  json meta = json::array();
  c10::List<torch::Tensor> tensors;
  for (const StatePiece& piece : pieces) {
    json slots = json::array();
    tensors.push_back(piece.value);
    for (const auto& [slot, values] : piece.slots) {
      slots.push_back(slot);
      tensors.push_back(values);
    }
    meta.push_back({{"name", piece.region.name},
                    {"dim", piece.region.dim},
                    {"begin", piece.region.begin},
                    {"length", piece.region.length},
                    {"optimizer_step", piece.optimizer_step},
                    {"slots", slots}});
  }
  const std::vector<char> bytes = torch::pickle_save(
      c10::ivalue::Tuple::create({c10::IValue(meta.dump()), c10::IValue(tensors)}));
  const std::string path = folder + "/" + shard_name(rank);
  write_file_atomically(path, bytes.data(), bytes.size());
  // The manifest vouches for what is on disk: make sure that is what this rank wrote.
  std::string written;
  if (!read_bytes(path, written) || written.size() != bytes.size() ||
      fnv1a(written.data(), written.size()) != fnv1a(bytes.data(), bytes.size())) {
    throw std::runtime_error("checkpoint: " + path + " does not read back as written");
  }
}

std::string write_checkpoint_manifest(const std::string& root, int step, const Config& config) {
  const std::string folder = checkpoint_step_directory(root, step);
  json shards = json::array();
  for (int r = 0; r < config.world; ++r) {
    std::string bytes;
    if (!read_bytes(folder + "/" + shard_name(r), bytes))
      throw std::runtime_error("checkpoint: rank " + std::to_string(r) + "'s shard is missing");
    shards.push_back({{"file", shard_name(r)},
                      {"rank", r},
                      {"bytes", static_cast<int64_t>(bytes.size())},
                      {"fnv1a", checksum_text(bytes)}});
  }
  json manifest = {
      {"format", kFormat},     {"version", kVersion},         {"step", step},
      {"world", config.world}, {"strategy", config.strategy}, {"config", to_json(config)},
      {"shards", shards}};
  write_file_atomically(folder + "/manifest.json", manifest.dump(2));
  const std::string name = folder.substr(folder.rfind('/') + 1);
  write_file_atomically(root + "/latest", name + "\n");
  // Only now, with a newer checkpoint complete, may the oldest go.
  apply_checkpoint_retention(root, step, config.checkpoint_keep);
  return folder;
}

CheckpointInfo find_checkpoint(const std::string& path, std::vector<std::string>* skipped) {
  if (!is_directory(path)) throw ConfigError("resume", "no such directory: " + path);
  CheckpointInfo info;
  struct stat manifest {};
  if (stat((path + "/manifest.json").c_str(), &manifest) == 0) {
    const std::string why = inspect(path, info);
    if (!why.empty()) throw ConfigError("resume", path + " is not a valid checkpoint: " + why);
    return info;
  }
  std::vector<std::string> reasons;
  for (int step : saved_steps(path)) {
    const std::string folder = checkpoint_step_directory(path, step);
    const std::string why = inspect(folder, info);
    if (why.empty()) {
      if (skipped != nullptr) *skipped = reasons;
      return info;
    }
    reasons.push_back(folder + " skipped: " + why);
  }
  std::string message = "no valid checkpoint in " + path;
  for (const auto& r : reasons) message += "\n  " + r;
  throw ConfigError("resume", message);
}

void check_resumable(const Config& config, const CheckpointInfo& checkpoint) {
  const json saved = json::parse(checkpoint.config_json);
  const json now = to_json(config);
  for (const char* key : {"seed", "data"}) {
    if (saved.at(key) != now.at(key)) {
      throw ConfigError(key, "the checkpoint was trained with " + std::string(key) + " " +
                                 saved.at(key).dump() + ", this run asks for " +
                                 now.at(key).dump());
    }
  }
  // A resumed run takes every weight from the checkpoint; its reference trains from the start,
  // so it must start where the checkpointed run started.
  const std::string started_from = saved.value("init_weights", std::string());
  if (started_from != config.init_weights) {
    auto describe = [](const std::string& file) {
      return file.empty() ? std::string("the seed's weights") : "--init-weights " + file;
    };
    throw ConfigError("init_weights", "the checkpoint's run started from " +
                                          describe(started_from) + ", this run names " +
                                          describe(config.init_weights) +
                                          " (the checkpoint's weights are what a resumed run "
                                          "continues from; the reference starts where it did)");
  }
  for (const char* group : {"model", "optimizer"}) {
    for (const auto& [key, value] : saved.at(group).items()) {
      if (!now.at(group).contains(key) || now.at(group).at(key) != value) {
        throw ConfigError(std::string(group) + "." + key,
                          "the checkpoint was trained with " + value.dump() +
                              ", this run asks for " + now.at(group).value(key, json()).dump());
      }
    }
  }
  Config written = config_from_json(saved);
  if (written.global_batch > 0) {
    written.micro_batch = written.global_batch / (written.world * written.grad_accum);
  }
  if (written.global_batch_size() != config.global_batch_size()) {
    throw ConfigError("global_batch",
                      "the checkpoint's run took " + std::to_string(written.global_batch_size()) +
                          " sequences per step; this run takes " +
                          std::to_string(config.global_batch_size()) + " (set --global-batch " +
                          std::to_string(written.global_batch_size()) +
                          " to resume at another world size)");
  }
  if (config.optimizer.schedule != "constant" || config.optimizer.warmup_steps > 0) {
    if (written.steps != config.steps) {
      throw ConfigError("steps",
                        "the learning-rate schedule depends on the total steps: the "
                        "checkpoint's run had " +
                            std::to_string(written.steps) + ", this run has " +
                            std::to_string(config.steps));
    }
  }
  if (checkpoint.step >= config.steps) {
    throw ConfigError("steps", "the checkpoint is at step " + std::to_string(checkpoint.step) +
                                   ", so a run of " + std::to_string(config.steps) +
                                   " steps has nothing left to train");
  }
}

TrainingState read_checkpoint(const CheckpointInfo& checkpoint, const ModelConfig& model,
                              uint64_t seed) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  {
    torch::NoGradGuard no_grad;
    GptModel reference(model, seed);
    for (const auto& [name, p] : reference->named_params())
      shapes.emplace_back(name, p.sizes().vec());
  }
  TrainingState state(shapes);
  for (const std::string& path : checkpoint.shards) {
    std::string bytes;
    if (!read_bytes(path, bytes)) throw std::runtime_error("cannot read " + path);
    try {
      const c10::IValue root = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
      const auto& elements = root.toTupleRef().elements();
      const json meta = json::parse(elements.at(0).toStringRef());
      const c10::List<torch::Tensor> tensors = elements.at(1).toTensorList();
      size_t next = 0;
      for (const json& m : meta) {
        StatePiece piece;
        piece.region = {m.at("name"), m.at("dim"), m.at("begin"), m.at("length")};
        piece.optimizer_step = m.at("optimizer_step");
        piece.value = tensors.get(next++);
        for (const json& slot : m.at("slots"))
          piece.slots[slot.get<std::string>()] = tensors.get(next++);
        state.add(piece);
      }
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
  }
  state.check_complete();
  return state;
}

std::shared_ptr<const LoadedCheckpoint> load_checkpoint_shared(const std::string& folder,
                                                               const ModelConfig& model,
                                                               uint64_t seed) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const LoadedCheckpoint>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto found = loaded[folder].lock()) return found;
  CheckpointInfo info = find_checkpoint(folder);
  TrainingState state = read_checkpoint(info, model, seed);
  auto made =
      std::make_shared<const LoadedCheckpoint>(LoadedCheckpoint{std::move(info), std::move(state)});
  loaded[folder] = made;
  return made;
}

}  // namespace shardscope
