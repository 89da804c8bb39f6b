#include "app/gui/loss_curves.h"

#include <nlohmann/json.hpp>

#include "app/gui/gui_style.h"

namespace shardscope::gui {

LossCurves loss_curves(const nlohmann::json& result) {
  using nlohmann::json;
  LossCurves curves;
  if (!result.is_object()) return curves;
  const json rank_losses = result.value("rank_losses", json::array());
  const json reports = result.value("reports_loss", json::array());
  for (size_t r = 0; r < rank_losses.size(); ++r) {
    const json& losses = rank_losses[r];
    bool reports_loss =
        r < reports.size() && reports[r].is_boolean() ? reports[r].get<bool>() : !losses.empty();
    if (r >= reports.size()) {
      // Recorded before `reports_loss`: a rank that only ever recorded 0 computed no loss.
      bool all_zero = !losses.empty();
      for (const auto& l : losses) all_zero = all_zero && l.is_number() && l.get<double>() == 0;
      reports_loss = !all_zero;
    }
    if (!reports_loss) {
      curves.left_out.push_back(static_cast<int>(r));
      continue;
    }
    ChartSeries s;
    s.label = "rank " + std::to_string(r);
    s.colour = rank_colour(static_cast<int>(r));
    for (size_t i = 0; i < losses.size(); ++i) {
      if (!losses[i].is_number()) continue;
      s.x.push_back(static_cast<float>(i));
      s.y.push_back(losses[i].get<float>());
    }
    curves.series.push_back(std::move(s));
  }
  const json reference = result.value("reference", json());
  if (reference.is_object() && reference.contains("losses") && reference["losses"].is_array()) {
    ChartSeries s;
    s.label = "reference";
    s.colour = 0xFFFFFFFF;
    for (size_t i = 0; i < reference["losses"].size(); ++i) {
      if (!reference["losses"][i].is_number()) continue;
      s.x.push_back(static_cast<float>(i));
      s.y.push_back(reference["losses"][i].get<float>());
    }
    curves.series.push_back(std::move(s));
  }
  return curves;
}

}  // namespace shardscope::gui
