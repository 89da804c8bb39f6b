// The name -> tensor files Python users bring and take (engine/state/weights_file.h), and the
// initial weights a run takes from one (engine/state/initial_weights.h): round trips bit for bit,
// and every kind of bad file refused with a message naming the file and the tensor. What Python
// itself writes and reads is tests/app/cli/weights_roundtrip_test.cpp.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <torch/serialize.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "engine/state/initial_weights.h"
#include "engine/state/weights.h"
#include "engine/state/weights_file.h"
#include "engine/train/config.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

NamedTensors sample() {
  torch::manual_seed(3);
  return {{"w", torch::randn({3, 5})},
          {"b", torch::randn({7})},
          {"scalar", torch::scalar_tensor(2.5, torch::kFloat)},
          {"empty", torch::empty({0, 4})}};
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && torch::equal(a, b);
}

void expect_bitwise(const NamedTensors& actual, const NamedTensors& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].first, expected[i].first);
    EXPECT_EQ(actual[i].second.scalar_type(), torch::kFloat) << actual[i].first;
    EXPECT_TRUE(same_bits(actual[i].second, expected[i].second)) << actual[i].first;
  }
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A safetensors file with a header of our choosing over `data_bytes` zero bytes.
std::string handmade_safetensors(const nlohmann::json& header, size_t data_bytes) {
  const std::string text = header.dump();
  std::string out(8, '\0');
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  return out + text + std::string(data_bytes, '\0');
}

TEST(SafetensorsFormat, RoundTripIsBitwiseInOrder) {
  const auto weights = sample();
  const std::string bytes = serialise_safetensors(weights);
  expect_bitwise(parse_safetensors(bytes, "mem"), weights);

  const auto path = test::test_temp_dir() / "w.safetensors";
  write_weights_file(path.string(), weights);
  expect_bitwise(read_weights_file(path.string()), weights);
}

TEST(SafetensorsFormat, HeaderIsJsonPaddedToEightBytesAndTheDataTilesTheFile) {
  const auto weights = sample();
  const std::string bytes = serialise_safetensors(weights);
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  EXPECT_EQ(header_size % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  const auto header = nlohmann::json::parse(bytes.substr(8, header_size));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ(header["w"]["dtype"], "F32");
  EXPECT_EQ(header["w"]["shape"], nlohmann::json::array({3, 5}));
  EXPECT_EQ(header["w"]["data_offsets"], nlohmann::json::array({0, 60}));
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json::array({60, 88}));
  EXPECT_EQ(header["scalar"]["shape"], nlohmann::json::array());
  EXPECT_EQ(bytes.size(), 8 + header_size + (15 + 7 + 1) * 4);
}

TEST(SafetensorsFormat, HalfBfloatAndDoubleBecomeFp32) {
  torch::manual_seed(4);
  const auto x = torch::randn({4, 3});
  const NamedTensors stored = {{"f16", x.to(torch::kHalf)},
                               {"bf16", x.to(torch::kBFloat16)},
                               {"f64", x.to(torch::kDouble) / 3.0}};
  const auto read = parse_safetensors(serialise_safetensors(stored), "mem");
  ASSERT_EQ(read.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(read[i].second.scalar_type(), torch::kFloat);
    // Widening half and bfloat16 is exact; double rounds to the nearest float, as .float() does.
    EXPECT_TRUE(same_bits(read[i].second, stored[i].second.to(torch::kFloat))) << read[i].first;
  }
}

// What a file is, from its first bytes, before the rest is read: 2 GB of zeros given as initial
// weights were read whole (2.4 GB of memory, 5 s; an 8 GB file 40 s) before its empty header
// was seen. A gigabyte, sparse, is refused without memory to show for it.
TEST(SafetensorsFormat, AFileThatIsNotOneIsRefusedFromItsHeaderWithoutReadingItWhole) {
  const std::string path = (test::test_temp_dir() / "zeros.bin").string();
  std::filesystem::resize_file((std::ofstream(path), path), uint64_t{1} << 30);
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  try {
    read_weights_file(path);
    FAIL() << "read";
  } catch (const WeightsFileError& e) {
    EXPECT_NE(std::string(e.what()).find("not a weights file (a safetensors header of 0 bytes"),
              std::string::npos)
        << e.what();
  }
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 100 * 1024) << "KB more at the peak";
  std::filesystem::remove(path);
}

TEST(TorchZipFormat, ExportReadsBackBitwise) {
  const auto path = test::test_temp_dir() / "w.pt";
  write_weights_file(path.string(), sample());  // not .safetensors: PyTorch's zip
  EXPECT_EQ(read_bytes(path).substr(0, 2), "PK");
  expect_bitwise(read_weights_file(path.string()), sample());
}

// One changed byte inside a tensor (the zip's CRC-32 for it is now wrong) once loaded without a
// word: LibTorch's zip reader skips miniz's CRC checks (issue 33).
TEST(TorchZipFormat, AChangedByteInsideATensorIsFoundByItsCrc) {
  const auto path = test::test_temp_dir() / "w.pt";
  NamedTensors big = {{"big", torch::arange(1 << 16, torch::kFloat)}};
  write_weights_file(path.string(), big);
  expect_bitwise(read_weights_file(path.string()), big);
  std::string bytes = read_bytes(path);
  bytes[bytes.size() / 2] ^= 0x01;  // inside the 256 KiB storage, far from headers
  std::ofstream(path, std::ios::binary) << bytes;
  try {
    read_weights_file(path.string());
    FAIL() << "a corrupted record was read";
  } catch (const WeightsFileError& e) {
    EXPECT_NE(std::string(e.what()).find("does not match its CRC-32"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
}

struct BadFile {
  std::string label;
  std::function<void(const fs::path&)> write;  // writes the bad file at the path
  std::vector<std::string> message;            // all of these in the error
};

void PrintTo(const BadFile& c, std::ostream* os) {
  *os << c.label;
}

class BadWeightsFile : public testing::TestWithParam<BadFile> {};

TEST_P(BadWeightsFile, IsRefusedNamingTheFileAndTheTensor) {
  const auto path = test::test_temp_dir() / "bad.weights";
  GetParam().write(path);
  try {
    read_weights_file(path.string());
    FAIL() << "read without an error";
  } catch (const WeightsFileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    for (const auto& part : GetParam().message)
      EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadWeightsFile,
    testing::Values(
        BadFile{"missing", [](const fs::path&) {}, {"no such file"}},
        BadFile{
            "directory", [](const fs::path& p) { fs::create_directories(p); }, {"is a directory"}},
        BadFile{"empty", [](const fs::path& p) { write_bytes(p, ""); }, {"too short"}},
        BadFile{"truncated_safetensors",
                [](const fs::path& p) {
                  const std::string b = serialise_safetensors(sample());
                  write_bytes(p, b.substr(0, b.size() - 10));
                },
                {"'b'", "truncated"}},
        BadFile{"truncated_header",
                [](const fs::path& p) {
                  write_bytes(p, serialise_safetensors(sample()).substr(0, 40));
                },
                {"header claims", "truncated"}},
        BadFile{"header_not_json",
                [](const fs::path& p) {
                  std::string b = serialise_safetensors(sample());
                  b[9] = '#';
                  write_bytes(p, b);
                },
                {"not a JSON object"}},
        BadFile{"integer_dtype",
                [](const fs::path& p) {
                  write_bytes(p, serialise_safetensors(
                                     {{"w", torch::randn({2})}, {"steps", torch::arange(3)}}));
                },
                {"'steps'", "dtype I64", "F32, F16, BF16 or F64"}},
        BadFile{"size_disagrees_with_shape",
                [](const fs::path& p) {
                  write_bytes(
                      p,
                      handmade_safetensors(
                          {{"w", {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 20}}}}},
                          20));
                },
                {"'w'", "needs 24 bytes", "give 20"}},
        BadFile{"overlapping_tensors",
                [](const fs::path& p) {
                  write_bytes(
                      p, handmade_safetensors(
                             {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
                              {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}},
                             12));
                },
                {"'b'", "overlapping"}},
        BadFile{"bytes_after_the_last_tensor",
                [](const fs::path& p) {
                  write_bytes(
                      p, handmade_safetensors(
                             {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}},
                             16));
                },
                {"8 data bytes after the last tensor"}},
        BadFile{"truncated_zip",
                [](const fs::path& p) {
                  const auto whole = p.string() + ".whole";
                  export_weights(whole, sample());
                  const std::string b = read_bytes(whole);
                  write_bytes(p, b.substr(0, b.size() / 2));
                },
                {"not a readable PyTorch file"}},
        BadFile{"integer_tensor_in_zip",
                [](const fs::path& p) {
                  export_weights(p.string(), {{"w", torch::randn({2})}, {"ids", torch::arange(4)}});
                },
                {"'ids'", "dtype Long"}},
        BadFile{"zip_without_a_dict",
                [](const fs::path& p) {
                  const auto bytes = torch::pickle_save(c10::IValue(torch::randn({2})));
                  write_bytes(p, std::string(bytes.begin(), bytes.end()));
                },
                {"not a name -> tensor dict"}},
        BadFile{"legacy_pickle",
                [](const fs::path& p) { write_bytes(p, "\x80\x02}q\x00."); },
                {"legacy format"}}),
    [](const auto& info) { return info.param.label; });

// The tiny model's parameters written to a file, with one change applied first.
fs::path tiny_weights_file(const std::string& name, const Config& c,
                           const std::function<void(NamedTensors&)>& change) {
  NamedTensors weights = to_cpu_copy(GptModel(c.model, c.seed)->named_params());
  change(weights);
  const auto path = test::test_temp_dir() / name;
  write_weights_file(path.string(), weights);
  return path;
}

Config tiny() {
  return config_from_json(nlohmann::json{{"preset", "tiny"}});
}

void expect_init_error(const Config& c, const std::vector<std::string>& parts) {
  try {
    load_initial_weights(c);
    FAIL() << "loaded without an error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "init_weights");
    const std::string what = e.what();
    EXPECT_NE(what.find(c.init_weights), std::string::npos) << what;
    for (const auto& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

TEST(InitialWeights, RefusesMissingExtraAndMisshapenTensors) {
  Config c = tiny();
  c.init_weights = tiny_weights_file("missing.safetensors", c, [](NamedTensors& w) {
                     w.erase(w.begin() + 3);
                   }).string();
  expect_init_error(c, {"no tensor named 'blocks.0.ln1.bias'", "shape [64]"});

  c.init_weights = tiny_weights_file("extra.pt", c, [](NamedTensors& w) {
                     w.emplace_back("adapter.weight", torch::zeros({2, 2}));
                   }).string();
  expect_init_error(c, {"'adapter.weight'", "is not a parameter of this model"});

  c.init_weights = tiny_weights_file("shape.safetensors", c, [](NamedTensors& w) {
                     w[4].second = torch::zeros({64, 3});
                   }).string();
  expect_init_error(c, {"'blocks.0.attn.qkv.weight' has shape [64, 3]", "is [192, 64]"});

  c.init_weights = (test::test_temp_dir() / "absent.pt").string();
  expect_init_error(c, {"no such file"});
}

// NaN or inf in --init-weights, or an F64 value that overflows float32, trained on to "loss nan"
// and exit 0 (issue 33): it is bad input naming the tensor.
TEST(InitialWeights, RefusesNaNInfinityAndValuesBeyondFloat32NamingTheTensor) {
  Config c = tiny();
  auto tensor = [](NamedTensors& w, const std::string& name) -> torch::Tensor& {
    for (auto& [n, t] : w)
      if (n == name) return t;
    throw std::logic_error("no parameter " + name);
  };
  c.init_weights = tiny_weights_file("nan.safetensors", c, [&](NamedTensors& w) {
                     tensor(w, "blocks.0.ln1.weight")[0] = std::nan("");
                   }).string();
  expect_init_error(c, {"'blocks.0.ln1.weight'", "NaN or infinite"});
  c.init_weights = tiny_weights_file("inf.pt", c, [&](NamedTensors& w) {
                     tensor(w, "blocks.0.ln1.bias")[1] = -INFINITY;
                   }).string();
  expect_init_error(c, {"'blocks.0.ln1.bias'", "NaN or infinite"});
  c.init_weights = tiny_weights_file("f64.safetensors", c, [&](NamedTensors& w) {
                     torch::Tensor& t = tensor(w, "blocks.0.attn.qkv.weight");
                     t = t.to(torch::kDouble);
                     t[0][0] = 1e300;
                   }).string();
  expect_init_error(c, {"'blocks.0.attn.qkv.weight'", "NaN or infinite"});
}

TEST(InitialWeights, TheModelStartsFromTheFileBitwiseAndKeepsItsFrozenParameters) {
  Config c = tiny();
  c.model.frozen = {"pos_emb.weight"};
  torch::manual_seed(11);
  c.init_weights = tiny_weights_file("init.safetensors", c, [](NamedTensors& w) {
                     for (auto& [name, t] : w) t = torch::randn(t.sizes());
                   }).string();
  const NamedTensors file = read_weights_file(c.init_weights);
  GptModel model = initial_model(c);
  expect_bitwise(to_cpu_copy(model->named_params()), file);
  for (const auto& [name, p] : model->named_params())
    EXPECT_EQ(p.requires_grad(), name != "pos_emb.weight") << name;

  Config seeded = c;
  seeded.init_weights.clear();
  EXPECT_NE(weights_checksum(initial_model(seeded)->named_params()),
            weights_checksum(model->named_params()));
}

TEST(InitialWeights, AFileRewrittenBetweenRunsIsReadAgain) {
  Config c = tiny();
  c.init_weights = tiny_weights_file("again.safetensors", c, [](NamedTensors& w) {
                     w[0].second.fill_(1.0);
                   }).string();
  auto first = load_initial_weights(c);  // held: a second call shares it
  EXPECT_EQ(load_initial_weights(c).get(), first.get());
  NamedTensors changed = *first;
  changed[0].second = torch::full_like(changed[0].second, 2.0);
  const auto written = fs::last_write_time(c.init_weights);
  write_weights_file(c.init_weights, changed);
  // The same size, and maybe the same time within the clock's resolution: made later for sure.
  fs::last_write_time(c.init_weights, written + std::chrono::seconds(2));
  EXPECT_EQ(load_initial_weights(c)->at(0).second[0][0].item<float>(), 2.0f);
  EXPECT_EQ(first->at(0).second[0][0].item<float>(), 1.0f);  // a run holding it is unaffected
}

}  // namespace
}  // namespace shardscope
