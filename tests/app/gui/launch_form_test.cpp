// The Launch form offers every option the configuration has, and warns when one gradient bucket
// leaves nothing to overlap.
#include "app/gui/launch_form.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/model/gpt_model.h"
#include "engine/train/config.h"
#include "strategies/data_parallel/bucket_preview.h"

namespace shardscope::gui {
namespace {

// Every key to_json(Config) writes, dotted as config files spell them.
void flatten(const nlohmann::json& j, const std::string& prefix, std::set<std::string>* keys) {
  for (const auto& [key, value] : j.items()) {
    const std::string dotted = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object()) {
      flatten(value, dotted, keys);
    } else {
      keys->insert(dotted);
    }
  }
}

std::set<std::string> config_keys() {
  std::set<std::string> keys;
  flatten(to_json(Config{}), "", &keys);
  return keys;
}

// A key the configuration gains without a field in the form (or a reason in
// launch_form_omitted_keys) fails here.
TEST(LaunchForm, OffersEveryConfigKey) {
  std::set<std::string> offered;
  for (const auto& section : launch_form_sections()) {
    for (const auto& f : section.fields) {
      EXPECT_TRUE(offered.insert(f.key).second) << f.key << " offered twice";
    }
  }
  std::set<std::string> omitted;
  for (const auto& o : launch_form_omitted_keys()) {
    EXPECT_FALSE(o.why.empty()) << o.key;
    omitted.insert(o.key);
  }
  const std::set<std::string> keys = config_keys();
  ASSERT_GT(keys.size(), 40u);
  for (const auto& key : keys) {
    EXPECT_TRUE(offered.count(key) + omitted.count(key) == 1)
        << key << ": the Launch form has no field for it (add one to launch_form.cpp, or say "
        << "why not in launch_form_omitted_keys)";
  }
  // And nothing the configuration does not have.
  for (const auto& key : offered) EXPECT_TRUE(keys.count(key)) << key << " is no config key";
  for (const auto& key : omitted) EXPECT_TRUE(keys.count(key)) << key << " is no config key";
}

// Fault injection is for tests, deliberately not in the form.
TEST(LaunchForm, FaultInjectionIsNotOffered) {
  bool found = false;
  for (const auto& o : launch_form_omitted_keys()) found = found || o.key == "inject_fault";
  EXPECT_TRUE(found);
}

// The strategies' own plan: a cap above the model's gradient bytes is one bucket; a cap of a
// tenth of them is about ten (plan_buckets closes a bucket once it reaches the cap).
TEST(BucketPreview, OneBucketWhenTheCapHoldsEveryGradient) {
  Config config =
      config_from_json({{"preset", "tiny"}, {"world", 2}, {"strategy", "ddp_bucketed"}});
  const double gradient_bytes = 4.0 * parameter_count(config.model);
  config.strategy_options.bucket_mb = 2 * gradient_bytes / (1024 * 1024);
  EXPECT_EQ(gradient_bucket_count(config), 1);
  config.strategy_options.bucket_mb = gradient_bytes / 10 / (1024 * 1024);
  const int buckets = gradient_bucket_count(config);
  EXPECT_GE(buckets, 5);
  EXPECT_LE(buckets, 11);
}

}  // namespace
}  // namespace shardscope::gui
