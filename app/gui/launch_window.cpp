#include <cstdio>
#include <set>

#include <imgui.h>

#include "app/gui/gui_style.h"

#include "app/gui/launch_form.h"
#include "app/gui/windows.h"
#include "engine/model/gpt_model.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "engine/train/strategy_registry.h"
#include "strategies/data_parallel/bucket_preview.h"
#include "strategies/pipeline/pipeline_schedule.h"

namespace shardscope::gui {

namespace {

nlohmann::json default_form() {
  nlohmann::json base = {
      {"preset", "tiny"}, {"world", 2}, {"strategy", "ddp_bucketed"}, {"steps", 4}};
  return to_json(config_from_json(base));
}

nlohmann::json::json_pointer pointer_of(const std::string& key) {
  std::string pointer = "/" + key;
  for (auto& c : pointer) c = c == '.' ? '/' : c;
  return nlohmann::json::json_pointer(pointer);
}

nlohmann::json& field(nlohmann::json& form, const std::string& key) {
  return form[pointer_of(key)];
}

// The form as a Config, with every problem by field; false when it cannot run. Validation stops
// at the first problem, so each field found wrong is set back to its default and the form
// checked again, until it passes or a field repeats: the user sees all at once.
bool validated(const nlohmann::json& form, Config* config, nlohmann::json* errors) {
  *errors = nlohmann::json::object();
  nlohmann::json trial = form;
  static const nlohmann::json defaults = to_json(Config{});
  for (int round = 0; round < 64; ++round) {
    try {
      Config checked = config_from_json(trial);
      finalize(checked);
      if (!errors->empty()) return false;
      *config = checked;
      return true;
    } catch (const ConfigError& e) {
      const std::string& key = e.field();
      if (errors->contains(key)) return false;  // its default did not help: nothing more to learn
      // A problem inside a section set back to its default (the preset's model replaced by the
      // default one) is the default's, not the user's: heads the form never showed.
      for (const auto& [wrong, message] : errors->items()) {
        if (key.rfind(wrong + ".", 0) == 0) return false;
      }
      const std::string what = e.what();
      (*errors)[key] = what.substr(std::min(what.size(), key.size() + 2));
      const auto at = pointer_of(key);
      if (!defaults.contains(at)) return false;
      trial[at] = defaults[at];
    } catch (const std::exception& e) {
      (*errors)["form"] = e.what();
      return false;
    }
  }
  return false;
}

// Keys the form has a widget for: their problems show beside the widget, the rest at the end.
std::set<std::string>& shown_keys() {
  static std::set<std::string> keys;
  return keys;
}

void error_for(const GuiSession& session, const std::string& key) {
  shown_keys().insert(key);
  if (!session.launch_errors.contains(key)) return;
  ImGui::SameLine();
  error_text(session.launch_errors[key].get<std::string>());
}

std::string json_text(const std::string& text) {
  return nlohmann::json(text).dump();
}

void combo(GuiSession& s, const char* label, const std::string& key,
           const std::vector<std::string>& choices) {
  nlohmann::json& v = field(s.launch_form, key);
  const std::string current = v.is_string() ? v.get<std::string>() : "";
  ImGui::SetNextItemWidth(scaled(200));
  if (ImGui::BeginCombo(label, current.c_str())) {
    for (const auto& c : choices) {
      // Through set_launch_field, which also re-derives the model when the preset changes.
      if (ImGui::Selectable(c.c_str(), c == current)) set_launch_field(s, key, json_text(c));
    }
    ImGui::EndCombo();
  }
  error_for(s, key);
}

void integer(GuiSession& s, const char* label, const std::string& key) {
  nlohmann::json& v = field(s.launch_form, key);
  int value = v.is_number() ? v.get<int>() : 0;
  ImGui::SetNextItemWidth(scaled(200));
  if (ImGui::InputInt(label, &value)) v = value;
  error_for(s, key);
}

void real(GuiSession& s, const char* label, const std::string& key) {
  nlohmann::json& v = field(s.launch_form, key);
  double value = v.is_number() ? v.get<double>() : 0.0;
  ImGui::SetNextItemWidth(scaled(200));
  if (ImGui::InputDouble(label, &value, 0, 0, "%.3g")) v = value;
  error_for(s, key);
}

void text(GuiSession& s, const char* label, const std::string& key, const char* hint) {
  nlohmann::json& v = field(s.launch_form, key);
  char buffer[1024] = {};
  if (v.is_string()) std::snprintf(buffer, sizeof(buffer), "%s", v.get<std::string>().c_str());
  ImGui::SetNextItemWidth(scaled(200));
  if (ImGui::InputTextWithHint(label, hint, buffer, sizeof(buffer))) v = std::string(buffer);
  error_for(s, key);
}

void flag(GuiSession& s, const char* label, const std::string& key) {
  nlohmann::json& v = field(s.launch_form, key);
  bool value = v.is_boolean() && v.get<bool>();
  if (ImGui::Checkbox(label, &value)) v = value;
  error_for(s, key);
}

// A checkpoint folder by its own name (step-000039), the whole path on hover.
void folder_line(const char* what, const std::string& path) {
  if (path.empty()) return;
  const size_t slash = path.find_last_of('/');
  ImGui::TextDisabled("%s %s", what,
                      slash == std::string::npos ? path.c_str() : path.c_str() + slash + 1);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", path.c_str());
}

// A choice's options: its own, or what a registry holds (the presets, the strategies, those
// that can sync a hybrid's data-parallel dimension).
std::vector<std::string> choices_of(const FormField& f) {
  if (!f.choices.empty()) return f.choices;
  if (f.key == "preset") return preset_names();
  if (f.key == "strategy_options.schedule") return pipeline::schedule_kinds();
  const StrategyRegistry& registry = StrategyRegistry::instance();
  if (f.key == "strategy_options.data_parallel_sync")
    return registry.names_where([](const StrategyTraits& t) { return t.data_parallel_sync; });
  return registry.names();
}

void draw_field(GuiSession& s, const FormField& f) {
  const char* label = f.label.c_str();
  switch (f.kind) {
    case FormField::Kind::kChoice:
      combo(s, label, f.key, choices_of(f));
      break;
    case FormField::Kind::kInteger:
      integer(s, label, f.key);
      break;
    case FormField::Kind::kReal:
      real(s, label, f.key);
      break;
    case FormField::Kind::kText:
      text(s, label, f.key, f.hint.c_str());
      break;
    case FormField::Kind::kFlag:
      flag(s, label, f.key);
      break;
  }
}

std::string form_strategy(const GuiSession& session) {
  const nlohmann::json& strategy = session.launch_form["strategy"];
  return strategy.is_string() ? strategy.get<std::string>() : "";
}

// The form holds only what the chosen strategy reads (its traits say which): an option of
// another strategy goes back to its default, so that nothing hidden changes or blocks the run.
// Returns how many fields the strategy does not read.
int keep_only_read_options(GuiSession& session) {
  static const nlohmann::json defaults = to_json(Config{});
  const OptionSupport read = strategy_traits(form_strategy(session)).options;
  int hidden = 0;
  for (const FormSection& section : launch_form_sections()) {
    for (const FormField& f : section.fields) {
      if (read.offers(f.key)) continue;
      ++hidden;
      const auto at = pointer_of(f.key);
      if (defaults.contains(at)) session.launch_form[at] = defaults[at];
    }
  }
  return hidden;
}

void strategy_notes(GuiSession& session) {
  if (const StrategyInfo* info = StrategyRegistry::instance().find(form_strategy(session))) {
    ImGui::TextWrapped("%s", info->description.c_str());
    if (!info->traits.teaching.empty()) ImGui::TextWrapped("%s", info->traits.teaching.c_str());
  }
}

// One bucket: the gradients are reduced at the end of backward, so overlap on and off are the
// same run. The plan is the strategies' own (bucket_preview.h), built again only when the model
// or the cap changes.
void bucket_warning(GuiSession& session, const Config& config) {
  static std::string planned_for;
  static int buckets = 0;
  const nlohmann::json key = {to_json(config)["model"], config.strategy_options.bucket_mb,
                              config.seed};
  if (key.dump() != planned_for) {
    planned_for = key.dump();
    // The plan builds the model's parameters: not for one the size of gpt-7b (for projections).
    constexpr int64_t kLargestPlanned = 200'000'000;
    try {
      buckets =
          parameter_count(config.model) <= kLargestPlanned ? gradient_bucket_count(config) : 0;
    } catch (const std::exception&) {
      buckets = 0;  // a model the form cannot build yet: the field errors say why
    }
  }
  if (buckets == 1) {
    const char* warning =
        "one bucket at this cap: every gradient is reduced at the end of backward, so there is "
        "nothing to overlap (lower bucket MB)";
    session.launch_warnings["strategy_options.bucket_mb"] = warning;
    ImGui::TextColored(ImVec4(1, 0.75f, 0.2f, 1), "%s", warning);
  } else if (buckets > 1) {
    ImGui::TextDisabled("%d gradient buckets at this cap", buckets);
  }
}

}  // namespace

// Sets one field of the Launch form from text (the script's `set KEY VALUE`).
void set_launch_field(GuiSession& session, const std::string& key, const std::string& text) {
  if (!session.launch_form.is_object()) session.launch_form = default_form();
  nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
  if (value.is_discarded()) value = text;
  if (key == "preset") session.launch_form.erase("model");
  field(session.launch_form, key) = value;
  if (key == "preset") {
    // The preset's model fills the form even when it cannot run here (gpt3-175b is for
    // projections): the model's fields were left empty, each "expected an integer".
    try {
      session.launch_form = to_json(config_from_json(session.launch_form));
    } catch (const std::exception&) {
      // A form that does not parse keeps its fields, each with its error beside it.
    }
  }
}

// Queues the form's run; false (with the reason in the session's message) when it cannot run.
bool start_launch(GuiSession& session) {
  Config config;
  nlohmann::json errors;
  if (!validated(session.launch_form, &config, &errors)) {
    session.launch_errors = errors;
    session.message =
        "cannot run: " + errors.begin().key() + ": " + errors.begin()->get<std::string>() +
        (errors.size() > 1
             ? " (and " + std::to_string(errors.size() - 1) + " more, beside their fields)"
             : "");
    return false;
  }
  try {
    check_environment(config);
  } catch (const ConfigError& e) {
    session.message = std::string("cannot run: ") + e.what();
    return false;
  }
  const std::string label =
      config.strategy + " w" + std::to_string(config.world) + " (" + config.mode + ")";
  session.launches.enqueue(config, label);
  session.message = "queued " + label;
  return true;
}

void draw_launch_window(GuiSession& session) {
  if (!session.launch_form.is_object()) session.launch_form = default_form();
  const int hidden = keep_only_read_options(session);
  how_to_read(
      "Pick a model, a world size and a strategy, then Run: ranks train as threads (or "
      "processes) on this machine, and the run is checked against one device trained on the "
      "same batches. Runs queue and go one at a time so their timings compare; each finished "
      "run appears in Timeline, Memory, Weight sync and Compare. A field that cannot work "
      "explains why beside it, and Run stays disabled until it is fixed.");
  Config config;
  nlohmann::json errors;
  const bool valid = validated(session.launch_form, &config, &errors);
  session.launch_errors = errors;

  ImGui::BeginChild("form", ImVec2(ImGui::GetContentRegionAvail().x * 0.62f, 0), true);
  shown_keys().clear();
  session.launch_fields = nlohmann::json::array();
  session.launch_warnings = nlohmann::json::object();
  for (const FormSection& section : launch_form_sections()) {
    if (section.collapsed) {
      if (!ImGui::CollapsingHeader(section.title.c_str())) continue;
    } else {
      ImGui::Separator();
      ImGui::TextDisabled("%s", section.title.c_str());
    }
    const OptionSupport read = strategy_traits(form_strategy(session)).options;
    for (const FormField& f : section.fields) {
      if (!read.offers(f.key)) continue;
      draw_field(session, f);
      session.launch_fields.push_back(f.key);
      if (f.key == "strategy") {
        strategy_notes(session);
        if (hidden > 0) {
          ImGui::TextDisabled("%d options of other strategies are not shown: %s does not read them",
                              hidden, form_strategy(session).c_str());
        }
      }
      // What auto chose, and why (rank threads sharing a GPU would share autograd's thread).
      if (f.key == "mode" && valid && session.launch_form.value("mode", "auto") == "auto") {
        ImGui::TextDisabled("  auto: %s%s", config.mode.c_str(),
                            config.mode == "processes" ? " (ranks sharing a CUDA device)" : "");
      }
      if (f.key == "strategy_options.bucket_mb" && valid) bucket_warning(session, config);
    }
  }
  for (const auto& [key, why] : session.launch_errors.items()) {
    // Problems of fields the form does not show (or of the whole form).
    if (shown_keys().count(key) == 0) {
      error_text(key + ": " + why.get<std::string>());
    }
  }
  ImGui::EndChild();

  ImGui::SameLine();
  ImGui::BeginChild("queue", ImVec2(0, 0), true);
  if (!valid) ImGui::BeginDisabled();
  if (ImGui::Button("Run", ImVec2(scaled(120), 0))) start_launch(session);
  if (!valid) ImGui::EndDisabled();
  ImGui::SameLine();
  bool active = false;  // Stop stops something only while a run runs or waits
  for (const auto& p : session.launches.progress())
    active = active || p.status == "running" || p.status == "queued";
  if (!active) ImGui::BeginDisabled();
  if (ImGui::Button("Stop", ImVec2(scaled(120), 0))) session.launches.stop_all();
  if (!active) ImGui::EndDisabled();
  if (!valid) {
    std::string keys;  // every wrong field, as the form lists them beside each
    for (const auto& [key, why] : session.launch_errors.items())
      keys += (keys.empty() ? "" : ", ") + key;
    const size_t wrong = session.launch_errors.size();
    ImGui::TextColored(ImVec4(1, 0.35f, 0.35f, 1), "fix the %zu field%s in red to run: %s", wrong,
                       wrong == 1 ? "" : "s", keys.c_str());
  }
  draw_launch_projection(session);
  ImGui::Separator();
  ImGui::TextDisabled("runs (one at a time)");
  for (const auto& p : session.launches.progress()) {
    char overlay[96];
    std::snprintf(overlay, sizeof(overlay), "%s: step %d of %d", p.status.c_str(), p.step, p.steps);
    ImGui::Text("#%d %s", p.id, p.label.c_str());
    ImGui::ProgressBar(p.steps > 0 ? float(p.step) / p.steps : 0.0f, ImVec2(-1, 0), overlay);
    if (!p.failure.empty()) ImGui::TextColored(ImVec4(1, 0.35f, 0.35f, 1), "%s", p.failure.c_str());
    folder_line("resumed from", p.resumed_from);
    folder_line("last checkpoint", p.checkpoint);
    if (p.resumed_as != 0) ImGui::TextDisabled("resumed as #%d", p.resumed_as);
    if (p.resumable()) {
      ImGui::PushID(p.id);
      if (ImGui::SmallButton("Resume")) {
        try {
          session.message = "queued #" + std::to_string(session.launches.resume(p.id));
        } catch (const std::exception& e) {
          session.message = std::string("cannot resume: ") + e.what();
        }
      }
      ImGui::PopID();
    }
    if (p.status == "running" && p.id == session.live_id) {
      // Per rank: the step it has reached (from the live trace).
      for (size_t r = 0; r < session.live_rank_steps.size(); ++r) {
        char rank_overlay[48];
        std::snprintf(rank_overlay, sizeof(rank_overlay), "rank %zu: in step %d", r,
                      session.live_rank_steps[r]);
        ImGui::ProgressBar(p.steps > 0 ? float(session.live_rank_steps[r]) / p.steps : 0.0f,
                           ImVec2(-1, 0), rank_overlay);
      }
    }
  }
  ImGui::EndChild();
}

}  // namespace shardscope::gui
