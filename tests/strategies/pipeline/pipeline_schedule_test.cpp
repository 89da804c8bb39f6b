// Pipeline schedules against their definitions: GPipe and 1F1B orders, how many micro-batches'
// activations each stage holds, every schedule's passes and placement, the bubble of an ideal
// pipeline against each schedule's formula, and every registered schedule's description of itself
// against what it does. (The multi-stage orders are checked against PyTorch's in
// pipeline_orders_test.cpp.)
#include "strategies/pipeline/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "strategies/pipeline/schedule_registry.h"

namespace shardscope::pipeline {
namespace {

TEST(PipelineSchedule, GPipeRunsEveryForwardThenEveryBackward) {
  const auto actions = schedule("gpipe", 1, 4, 3);
  const std::vector<Action> expected = {{Pass::kForward, 0, 1},  {Pass::kForward, 1, 1},
                                        {Pass::kForward, 2, 1},  {Pass::kBackward, 0, 1},
                                        {Pass::kBackward, 1, 1}, {Pass::kBackward, 2, 1}};
  EXPECT_EQ(actions, expected);
}

TEST(PipelineSchedule, OneForwardOneBackwardAfterWarmUp) {
  // Stage 1 of 4 warms up with 2 forwards, then alternates, then drains.
  const auto actions = schedule("1f1b", 1, 4, 5);
  const std::vector<Action> expected = {{Pass::kForward, 0, 1},  {Pass::kForward, 1, 1},
                                        {Pass::kForward, 2, 1},  {Pass::kBackward, 0, 1},
                                        {Pass::kForward, 3, 1},  {Pass::kBackward, 1, 1},
                                        {Pass::kForward, 4, 1},  {Pass::kBackward, 2, 1},
                                        {Pass::kBackward, 3, 1}, {Pass::kBackward, 4, 1}};
  EXPECT_EQ(actions, expected);
  // The last stage never waits: forward, then at once its backward.
  const auto last = schedule("1f1b", 3, 4, 2);
  const std::vector<Action> alternating = {{Pass::kForward, 0, 3},
                                           {Pass::kBackward, 0, 3},
                                           {Pass::kForward, 1, 3},
                                           {Pass::kBackward, 1, 3}};
  EXPECT_EQ(last, alternating);
}

TEST(PipelineSchedule, OneFOneBHoldsAtMostStagesMicroBatchesGPipeAllOfThem) {
  for (int p : {2, 4}) {
    for (int m : {1, 4, 8}) {
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(peak_in_flight(schedule("gpipe", s, p, m)), m);
        EXPECT_EQ(peak_in_flight(schedule("1f1b", s, p, m)), std::min(p - s, m))
            << "stage " << s << " of " << p << ", m " << m;
      }
    }
  }
}

struct Shape {
  const char* kind;
  int p, v, m;
};

TEST(PipelineSchedule, EveryStageRunsEachMicroBatchOnceEachWayOnItsRank) {
  const std::vector<Shape> shapes = {{"gpipe", 4, 1, 8},
                                     {"1f1b", 4, 1, 8},
                                     {"interleaved-1f1b", 4, 2, 8},
                                     {"interleaved-1f1b", 3, 3, 6},
                                     {"interleaved-1f1b", 4, 2, 3},
                                     {"zero-bubble", 4, 2, 8},
                                     {"zero-bubble", 2, 4, 4},
                                     {"zbv", 4, 2, 8},
                                     {"zbv", 4, 2, 3},
                                     {"dualpipev", 4, 2, 8},
                                     {"dualpipev", 3, 2, 9}};
  for (const Shape& c : shapes) {
    // (stage, micro-batch) -> its passes in order: forward, then a whole backward or an input
    // and a weight pass.
    std::map<std::pair<int, int>, std::string> seen;
    for (int r = 0; r < c.p; ++r) {
      const auto held = rank_stages(c.kind, r, c.p, c.v);
      ASSERT_EQ(held.size(), static_cast<size_t>(c.v)) << c.kind;
      for (int s : held) EXPECT_EQ(stage_rank(c.kind, s, c.p, c.v), r) << c.kind << " " << s;
      for (const auto& a : schedule(c.kind, r, c.p, c.m, c.v)) {
        ASSERT_NE(std::find(held.begin(), held.end(), a.stage), held.end()) << c.kind;
        seen[{a.stage, a.micro}] += "FBIW"[static_cast<int>(a.pass)];
      }
    }
    ASSERT_EQ(seen.size(), static_cast<size_t>(c.p * c.v * c.m)) << c.kind;
    for (const auto& [key, passes] : seen) {
      EXPECT_TRUE(passes == "FB" || passes == "FIW")
          << c.kind << " stage " << key.first << " micro-batch " << key.second << ": " << passes;
    }
  }
  // The V puts the first and the last stage on rank 0; the loop puts stage r + k p on rank r.
  EXPECT_EQ(rank_stages("zbv", 1, 4, 2), (std::vector<int>{1, 6}));
  EXPECT_EQ(rank_stages("interleaved-1f1b", 1, 4, 3), (std::vector<int>{1, 5, 9}));
}

TEST(PipelineSchedule, IdealBubbleIsEachSchedulesFormula) {
  for (const char* kind : {"gpipe", "1f1b"}) {
    for (int p : {1, 2, 4}) {
      for (int m : {1, 4, 8}) {
        for (double weight : {0.0, 1.0}) {  // backward as long as forward, or twice
          EXPECT_NEAR(simulated_bubble(kind, p, m, 1, {1.0, 1.0, weight}),
                      bubble_formula(kind, p, m), 1e-12)
              << kind << " p " << p << " m " << m << " weight " << weight;
        }
      }
    }
  }
  EXPECT_DOUBLE_EQ(bubble_formula("1f1b", 4, 8), 3.0 / 11.0);
  // Interleaving v stages shrinks the bubble v-fold: (p-1)/(v m + p-1), whatever the passes cost.
  for (const Shape& c : {Shape{"interleaved-1f1b", 2, 2, 4}, Shape{"interleaved-1f1b", 4, 2, 8},
                         Shape{"interleaved-1f1b", 3, 2, 6}, Shape{"interleaved-1f1b", 4, 4, 8}}) {
    for (double weight : {0.0, 1.0}) {
      EXPECT_NEAR(simulated_bubble(c.kind, c.p, c.m, c.v, {1.0, 1.0, weight}),
                  bubble_formula(c.kind, c.p, c.m, c.v), 1e-12)
          << c.kind << " p " << c.p << " v " << c.v << " m " << c.m;
    }
  }
  EXPECT_DOUBLE_EQ(bubble_formula("interleaved-1f1b", 4, 8, 2), 3.0 / 19.0);
  // Zero-bubble (ZB-H1, interleaved): (p-1)(F + B - W) idle where 1F1B idles (p-1)(F + B + W),
  // so (p-1)/(3 v m + p-1) with equal passes.
  for (const Shape& c : {Shape{"zero-bubble", 2, 2, 4}, Shape{"zero-bubble", 4, 2, 8},
                         Shape{"zero-bubble", 3, 2, 6}, Shape{"zero-bubble", 2, 4, 4}}) {
    const double bubble = simulated_bubble(c.kind, c.p, c.m, c.v);
    EXPECT_NEAR(bubble, bubble_formula(c.kind, c.p, c.m, c.v), 1e-12) << c.p << " " << c.v;
    EXPECT_LT(bubble, simulated_bubble("interleaved-1f1b", c.p, c.m, c.v));
  }
  // ZB-V and DualPipeV as PyTorch orders them: no more idle than zero-bubble's; their papers'
  // zero needs the steady state their warm-up here does not fully reach.
  for (const char* kind : {"zbv", "dualpipev"}) {
    for (const Shape& c : {Shape{kind, 2, 2, 4}, Shape{kind, 4, 2, 8}, Shape{kind, 3, 2, 6}}) {
      EXPECT_LE(simulated_bubble(kind, c.p, c.m, 2),
                bubble_formula("zero-bubble", c.p, c.m, 2) + 1e-12)
          << kind << " p " << c.p;
    }
  }
}

TEST(PipelineSchedule, ActivationCountsFollowTheSchedule) {
  for (int r = 0; r < 4; ++r) {
    // Interleaved 1F1B warms up with (v-1) rounds plus two passes per hop to the last rank.
    EXPECT_EQ(peak_in_flight(schedule("interleaved-1f1b", r, 4, 8, 2)), 4 + 2 * (3 - r) + 1);
    // Zero-bubble warms up with one pass per hop but frees a micro-batch only at its weight
    // pass, r of which rank r defers: v p on every rank.
    EXPECT_EQ(peak_in_flight(schedule("zero-bubble", r, 4, 8, 2)), 2 * 4);
    // ZB-V: 2p stage-halves' activations on every rank, 1F1B's memory in full stages.
    EXPECT_EQ(peak_in_flight(schedule("zbv", r, 4, 8, 2)), 2 * 4);
  }
}

TEST(PipelineSchedule, RejectsNonsense) {
  EXPECT_THROW(schedule("zigzag", 0, 2, 2), std::invalid_argument);
  EXPECT_THROW(schedule("1f1b", 2, 2, 2), std::invalid_argument);
  EXPECT_THROW(schedule("1f1b", 0, 2, 0), std::invalid_argument);
  EXPECT_THROW(schedule("1f1b", 0, 2, 2, 2), std::invalid_argument);
  EXPECT_THROW(schedule("zbv", 0, 2, 4, 3), std::invalid_argument);
  EXPECT_THROW(schedule("dualpipev", 0, 2, 3, 2), std::invalid_argument);
  EXPECT_THROW(schedule("interleaved-1f1b", 0, 4, 9, 2), std::invalid_argument);  // 2 rounds
}

TEST(PipelineSchedule, ListsTheSchedulesInTheirDocumentedOrder) {
  // The order `--schedule`'s help (app/cli/cli_flags.cpp), the GUI's list and `bench --schedules
  // all` show: the order pipeline_orders.cpp defines them in.
  const std::vector<std::string> expected = {"1f1b",        "gpipe", "interleaved-1f1b",
                                             "zero-bubble", "zbv",   "dualpipev"};
  EXPECT_EQ(schedule_kinds(), expected);
  EXPECT_EQ(kind_problem("zigzag"),
            "unknown pipeline schedule 'zigzag' (1f1b, gpipe, interleaved-1f1b, zero-bubble, zbv, "
            "dualpipev)");
}

// The value of a bubble formula's text ("(p-1)/(3*v*m+p-1)"): integers, p, m and v, + - * / and
// parentheses.
class FormulaText {
 public:
  FormulaText(const std::string& text, int p, int m, int v) : text_(text), p_(p), m_(m), v_(v) {}
  double value() {
    const double out = sum();
    if (at_ != text_.size()) throw std::invalid_argument("formula text: " + text_);
    return out;
  }

 private:
  double sum() {
    double out = product();
    while (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) {
      const char op = text_[at_++];
      const double rhs = product();
      out = op == '+' ? out + rhs : out - rhs;
    }
    return out;
  }
  double product() {
    double out = factor();
    while (at_ < text_.size() && (text_[at_] == '*' || text_[at_] == '/')) {
      const char op = text_[at_++];
      const double rhs = factor();
      out = op == '*' ? out * rhs : out / rhs;
    }
    return out;
  }
  double factor() {
    if (at_ >= text_.size()) throw std::invalid_argument("formula text: " + text_);
    const char c = text_[at_];
    if (c == '(') {
      ++at_;
      const double out = sum();
      if (at_ >= text_.size() || text_[at_++] != ')') {
        throw std::invalid_argument("formula text: " + text_);
      }
      return out;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      double out = 0;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
        out = 10 * out + (text_[at_++] - '0');
      }
      return out;
    }
    ++at_;
    if (c == 'p') return p_;
    if (c == 'm') return m_;
    if (c == 'v') return v_;
    throw std::invalid_argument("formula text: " + text_);
  }

  std::string text_;
  int p_, m_, v_;
  size_t at_ = 0;
};

// Whatever schedule registers, what it says of itself (ScheduleInfo) must be what it does: the
// free functions answer from the description, the runtime places stages and sends by it, and the
// GUI prints its formula beside the simulated bubble.
TEST(PipelineSchedule, EveryRegisteredScheduleDescribesItselfConsistently) {
  const auto& kinds = schedule_kinds();
  ASSERT_FALSE(kinds.empty());
  EXPECT_EQ(std::set<std::string>(kinds.begin(), kinds.end()).size(), kinds.size())
      << "a schedule listed twice";
  for (const std::string& kind : kinds) {
    SCOPED_TRACE(kind);
    const ScheduleInfo* info = ScheduleRegistry::instance().find(kind);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->name, kind);
    EXPECT_EQ(kind_problem(kind), "");
    const int v0 = default_stages_per_rank(kind);
    EXPECT_EQ(stages_per_rank_problem(kind, v0), "");
    // The stage counts it accepts (three past the least where it has no bound), and refuses.
    const int least = info->min_stages_per_rank, most = info->max_stages_per_rank;
    EXPECT_NE(stages_per_rank_problem(kind, least - 1), "");
    if (most > 0) {
      EXPECT_NE(stages_per_rank_problem(kind, most + 1), "");
    }
    std::vector<int> counts;
    for (int v = least; v <= (most > 0 ? most : least + 2); ++v) {
      EXPECT_EQ(stages_per_rank_problem(kind, v), "") << v;
      counts.push_back(v);
    }

    // Every stage on exactly one rank, which rank_stages and stage_rank agree on.
    for (int p = 2; p <= 4; ++p) {
      for (int v : counts) {
        std::vector<int> holders(p * v, -1);
        for (int r = 0; r < p; ++r) {
          const auto held = rank_stages(kind, r, p, v);
          ASSERT_EQ(held.size(), static_cast<size_t>(v)) << "p " << p << " v " << v;
          for (int s : held) {
            ASSERT_GE(s, 0);
            ASSERT_LT(s, p * v);
            EXPECT_EQ(holders[s], -1) << "stage " << s << " on two ranks";
            holders[s] = r;
            EXPECT_EQ(stage_rank(kind, s, p, v), r) << "stage " << s << " of p " << p;
          }
        }
        // The V puts the first and the last stage on rank 0; a loop the last on rank p-1.
        const bool v_shaped = info->placement == StagePlacement::kV;
        EXPECT_EQ(holders.back(), v_shaped ? 0 : p - 1) << "p " << p << " v " << v;
      }
    }

    // Every micro-batch count it accepts runs each micro-batch through every stage once each way,
    // on the rank its placement says, to the end; it splits backward exactly when its orders run
    // input and weight passes.
    for (int p = 2; p <= 4; ++p) {
      bool split = false;
      for (int m = 1; m <= 2 * p + 3; ++m) {
        if (!micro_batches_problem(kind, p, m).empty()) {
          EXPECT_THROW(schedule(kind, 0, p, m, v0), std::invalid_argument)
              << "p " << p << " m " << m;
          continue;
        }
        std::map<std::pair<int, int>, std::string> passes;  // (stage, micro-batch) -> "FB"/"FIW"
        bool placed = true;  // every pass on the rank that holds its stage
        for (int r = 0; r < p; ++r) {
          for (const Action& a : schedule(kind, r, p, m, v0)) {
            placed = placed && stage_rank(kind, a.stage, p, v0) == r;
            passes[{a.stage, a.micro}] += "FBIW"[static_cast<int>(a.pass)];
            split = split || a.pass == Pass::kInput || a.pass == Pass::kWeight;
          }
        }
        EXPECT_TRUE(placed) << "p " << p << " m " << m;
        EXPECT_EQ(passes.size(), static_cast<size_t>(p * v0 * m)) << "p " << p << " m " << m;
        for (const auto& [key, order] : passes) {
          EXPECT_TRUE(order == "FB" || order == "FIW")
              << "p " << p << " m " << m << " stage " << key.first << " micro-batch " << key.second
              << ": " << order;
        }
        EXPECT_NO_THROW(simulated_bubble(kind, p, m, v0)) << "p " << p << " m " << m;
      }
      EXPECT_EQ(split, splits_backward(kind)) << "p " << p;
    }

    // The formula's text is the formula, and an ideal pipeline idles what it says, or (for the
    // V-shaped schedules, whose orders do not reach their papers' steady state) no less.
    for (int p : {1, 2, 4}) {
      for (int m : {1, 4, 8}) {
        EXPECT_NEAR(FormulaText(bubble_formula_text(kind), p, m, v0).value(),
                    bubble_formula(kind, p, m, v0), 1e-12)
            << bubble_formula_text(kind) << " p " << p << " m " << m;
      }
    }
    const double simulated = simulated_bubble(kind, 4, 8, v0);
    if (info->bubble_formula_exact) {
      EXPECT_NEAR(simulated, bubble_formula(kind, 4, 8, v0), 1e-12);
    } else {
      EXPECT_GE(simulated, bubble_formula(kind, 4, 8, v0) - 1e-12);
      EXPECT_LE(simulated, bubble_formula("zero-bubble", 4, 8, v0) + 1e-12);
    }
  }
}

TEST(PipelineSchedule, RegistryRefusesInconsistentSchedules) {
  ScheduleRegistry registry;  // a registry of its own: the program's stays as it is
  auto described = [](const std::string& name) {
    ScheduleInfo s;
    s.name = name;
    s.orders = [](int, int, int, int) { return std::vector<Action>{}; };
    s.bubble_formula = [](int, int, int) { return 0.0; };
    s.bubble_formula_text = "0";
    return s;
  };
  registry.add(described("one"));
  EXPECT_THROW(registry.add(described("one")), std::logic_error);
  ScheduleInfo no_orders = described("two");
  no_orders.orders = nullptr;
  EXPECT_THROW(registry.add(no_orders), std::logic_error);
  ScheduleInfo refuses_its_default = described("three");
  refuses_its_default.default_stages_per_rank = 2;
  EXPECT_THROW(registry.add(refuses_its_default), std::logic_error);
  ScheduleInfo wide_v = described("four");
  wide_v.placement = StagePlacement::kV;
  wide_v.default_stages_per_rank = wide_v.min_stages_per_rank = 3;
  wide_v.max_stages_per_rank = 3;
  EXPECT_THROW(registry.add(wide_v), std::logic_error);
  EXPECT_EQ(registry.names(), std::vector<std::string>{"one"});
}

}  // namespace
}  // namespace shardscope::pipeline

namespace shardscope::pipeline {
namespace {

// The projection executes each schedule with each pass's own cost and a transfer between ranks
// (issue 34). GPipe with forward F, backward B and transfer d: the first micro-batch reaches the
// last stage after (p-1)(F+d), every stage then runs m forwards in a row, and backward mirrors
// it, so the step is 2 (p-1) d + (m+p-1)(F+B) in closed form; with d = 0, 1F1B idles
// (p-1)/(m+p-1) of it, as its formula says.
TEST(SimulateSchedule, GpipeTakesTheClosedFormAndTransfersAddOnTheFillAndDrain) {
  const int p = 4, m = 8;
  const double F = 1.0, B = 2.0, d = 0.25;
  auto cost = [&](Pass pass, int) { return pass == Pass::kForward ? F : B; };
  double span = 0;
  for (const auto& rank : simulate_schedule("gpipe", p, m, 1, cost, d))
    span = std::max(span, rank.back().end);
  EXPECT_DOUBLE_EQ(span, 2 * (p - 1) * d + (m + p - 1) * (F + B));
  double one_f_one_b = 0;
  for (const auto& rank : simulate_schedule("1f1b", p, m, 1, cost, 0))
    one_f_one_b = std::max(one_f_one_b, rank.back().end);
  EXPECT_NEAR(1 - m * (F + B) / one_f_one_b, double(p - 1) / (m + p - 1), 1e-12);
}

}  // namespace
}  // namespace shardscope::pipeline
