#include "app/perf/perf_suite.h"

#include "app/analysis/text_table.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace shardscope::perf {

namespace {

std::string number(double v) {
  char buf[48];
  if (v == 0) return "";
  if (std::abs(v) >= 100) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else if (std::abs(v) >= 1) {
    std::snprintf(buf, sizeof(buf), "%.3g", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3g", v);
  }
  return buf;
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string round_name(int round) {
  return round == 0 ? "warm-up" : "round " + std::to_string(round);
}

Comparison interleaved(const PerfOptions& options, const std::string& label, int rounds,
                       const std::function<double()>& a, const std::function<double()>& b) {
  std::vector<double> as, bs, ratios;
  for (int r = 0; r <= rounds; ++r) {
    if (options.progress) options.progress("  " + label + ", " + round_name(r));
    const double x = a();
    const double y = b();
    if (r == 0) continue;
    as.push_back(x);
    bs.push_back(y);
    ratios.push_back(x / y);
  }
  return {median(as), median(bs), median(ratios)};
}

PerfRow step_time_row(const std::string& section, const std::string& what, const Comparison& c,
                      double limit) {
  PerfRow row;
  row.section = section;
  row.what = what;
  row.ours = c.a * 1e3;
  row.baseline = c.b * 1e3;
  row.unit = "ms/step";
  row.ratio = c.ratio;
  char target[32];
  std::snprintf(target, sizeof(target), "<= %g", limit);
  row.target = target;
  row.met = c.ratio <= limit;
  return row;
}

double median_step_seconds(const std::vector<double>& steps) {
  if (steps.size() <= 1) return median(steps);
  return median(std::vector<double>(steps.begin() + 1, steps.end()));
}

const std::vector<std::string>& section_names() {
  static const std::vector<std::string> names = {"engine",   "tracing", "collectives",
                                                 "backends", "ddp",     "startup",
                                                 "gui",      "scaling", "host-ops"};
  return names;
}

std::vector<PerfRow> run_suite(const PerfOptions& options) {
  static const std::map<std::string, void (*)(const PerfOptions&, std::vector<PerfRow>&)> sections =
      {{"engine", measure_engine_overhead},
       {"tracing", measure_tracing_overhead},
       {"collectives", measure_collectives},
       {"backends", measure_backends},
       {"ddp", measure_ddp_against_pytorch},
       {"startup", measure_startup},
       {"gui", measure_gui},
       {"scaling", measure_scaling},
       {"host-ops", measure_host_ops}};
  for (const auto& s : options.sections) {
    if (sections.count(s) == 0) {
      std::string known;
      for (const auto& n : section_names()) known += (known.empty() ? "" : ", ") + n;
      throw std::invalid_argument("unknown section '" + s + "' (" + known + ")");
    }
  }
  std::vector<PerfRow> rows;
  for (const auto& name : section_names()) {
    if (!options.sections.empty() && std::find(options.sections.begin(), options.sections.end(),
                                               name) == options.sections.end()) {
      continue;
    }
    if (options.progress) options.progress("[" + name + "]");
    sections.at(name)(options, rows);
  }
  return rows;
}

void print_rows(const std::vector<PerfRow>& rows, const std::string& format, std::ostream& out) {
  if (format == "json") {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : rows) {
      all.push_back({{"section", r.section},
                     {"what", r.what},
                     {"ours", r.ours},
                     {"baseline", r.baseline},
                     {"unit", r.unit},
                     {"ratio", r.ratio},
                     {"target", r.target},
                     {"met", r.met},
                     {"note", r.note}});
    }
    out << all.dump(2) << "\n";
    return;
  }
  const std::vector<std::string> headers = {"section", "case",  "ours",   "baseline",
                                            "unit",    "ratio", "target", "note"};
  std::vector<std::vector<std::string>> table{headers};
  for (const auto& r : rows) {
    std::string ratio = number(r.ratio);
    std::string target = r.target.empty() ? "" : r.target + (r.met ? " ok" : " MISSED");
    table.push_back(
        {r.section, r.what, number(r.ours), number(r.baseline), r.unit, ratio, target, r.note});
  }
  analysis::print_text_table(table, format == "markdown", out);
}

}  // namespace shardscope::perf
