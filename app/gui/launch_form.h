#pragma once

#include <string>
#include <vector>

namespace shardscope::gui {

// The Launch form as data: every configuration key it offers, with its widget. Drawn by
// launch_window.cpp; checked by a test against every key `to_json(Config)` writes, so that a
// configuration option added later gets a field (or a stated reason not to).
struct FormField {
  enum class Kind { kChoice, kInteger, kReal, kText, kFlag };
  std::string key;  // as a config file spells it: "strategy_options.bucket_mb"
  std::string label;
  Kind kind = Kind::kInteger;
  std::vector<std::string> choices;  // kChoice; empty: the strategy registry's or the presets'
  std::string hint;                  // kText: shown while empty
};

struct FormSection {
  std::string title;
  std::vector<FormField> fields;
  bool collapsed = false;  // advanced settings start folded
};

const std::vector<FormSection>& launch_form_sections();

// Configuration keys the form deliberately does not offer, each with why (launch_form.cpp).
struct OmittedKey {
  std::string key;
  std::string why;
};
const std::vector<OmittedKey>& launch_form_omitted_keys();

}  // namespace shardscope::gui
