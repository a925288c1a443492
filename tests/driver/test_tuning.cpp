// Autotuning records (driver/tuning.h): a tuned entry survives encoding exactly, bytes that are
// not one (truncated, another format, an inconsistent record) are refused, never a crash; the key
// is the program entry's parts plus the candidates and the machine; the settings' bad values are
// errors that name them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/env_guard.h"
#include "driver/driver.h"
#include "driver/program_entry.h"
#include "driver/tuning.h"
#include "ir/parser.h"
#include "runtime/support/error.h"

using namespace stitch;

namespace {

struct Tuned {
  ir::Graph graph;
  std::vector<int64_t> shape{32, 64};
  std::vector<ir::ConcreteInput> sig;
  std::unique_ptr<target::Target> target;
  driver::Build build;
  driver::TuningRecord record;
};

// A softmax built for sm_90 (no device needed) and a record of three candidates.
std::unique_ptr<Tuned> tuned() {
  auto t = std::make_unique<Tuned>();
  t->graph = driver::optimize(
      ir::parseModule("graph f(x: f32[N, 64]) {\n  y = softmax(x)\n  return y\n}\n", "t").at(0));
  t->sig = {{ir::DType::F32, t->shape}};
  t->target = target::makeTarget(target::namedTarget("sm_90"));
  t->build = driver::build(t->graph, ir::bindInputs(t->graph, t->sig), *t->target, {});
  driver::TuningRecord& r = t->record;
  r.machine = "cuda sm_90: a device, driver 1";
  r.subject = "f(f32[32,64])";
  r.tunedAt = 1800000000;
  r.budgetMs = 1000;
  r.seconds = 0.25;
  r.chosen = 1;
  for (int k = 0; k < 3; ++k) {
    driver::CandidateTiming c;
    c.candidate = k;
    c.kernels = k + 1;
    c.modelSeconds = 1e-5 * (k + 1);
    c.medianSeconds = k == 1 ? 8e-6 : 1.2e-5;
    c.minSeconds = c.medianSeconds * 0.9;
    c.runs = 5;
    c.summaries = {t->build.plan.kernels.at(0).summary};
    if (k == 2) {
      c.outcome = driver::CandidateOutcome::Mismatch;
      c.note = "y[3] is 1 where the pick's is 2";
      c.medianSeconds = c.minSeconds = 0;
      c.runs = 0;
    }
    r.candidates.push_back(c);
  }
  return t;
}

std::vector<uint8_t> encoded(const Tuned& t) {
  return driver::encodeTunedEntry(t.record, t.build.artifact);
}

void expectRefused(const std::vector<uint8_t>& bytes, const Tuned& t, const std::string& what) {
  try {
    driver::decodeTunedEntry(bytes, *t.target);
    ADD_FAILURE() << "accepted: " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << what << ": " << e.what();
  }
}

}  // namespace

TEST(TuningRecord, AnEntrySurvivesEncoding) {
  auto t = tuned();
  const std::vector<uint8_t> bytes = encoded(*t);
  driver::TunedEntry e = driver::decodeTunedEntry(bytes, *t->target);
  EXPECT_EQ(driver::encodeTunedEntry(e.record, e.artifact), bytes);
  EXPECT_EQ(e.record.machine, t->record.machine);
  EXPECT_EQ(e.record.subject, "f(f32[32,64])");
  EXPECT_EQ(e.record.chosen, 1);
  ASSERT_EQ(e.record.candidates.size(), 3u);
  EXPECT_EQ(e.record.candidates[2].outcome, driver::CandidateOutcome::Mismatch);
  EXPECT_EQ(e.record.candidates[2].note, t->record.candidates[2].note);
  EXPECT_EQ(e.record.chosenTiming().medianSeconds, 8e-6);
  const fusion::KernelSummary& k = e.record.candidates[0].summaries.at(0);
  const fusion::KernelSummary& was = t->build.plan.kernels.at(0).summary;
  EXPECT_EQ(k.bytesRead, was.bytesRead);
  EXPECT_EQ(k.expensiveOps, was.expensiveOps);
  EXPECT_EQ(k.threadsPerBlock, was.threadsPerBlock);
  EXPECT_NO_THROW(driver::validateProgramArtifact(e.artifact, t->graph, t->sig, *t->target));
}

TEST(TuningRecord, BytesThatAreNotAnEntryAreRefused) {
  auto t = tuned();
  const std::vector<uint8_t> bytes = encoded(*t);
  // Every truncation.
  for (size_t n = 0; n < bytes.size(); n += std::max<size_t>(1, bytes.size() / 97))
    expectRefused(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(n)), *t,
                  "truncated to " + std::to_string(n));
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  expectRefused(longer, *t, "a byte too many");
  std::vector<uint8_t> format = bytes;
  format[0] ^= 0xff;
  expectRefused(format, *t, "another format");
  // Records that do not hold together.
  {
    auto u = tuned();
    u->record.chosen = 2;  // outputs differed: never chosen
    expectRefused(encoded(*u), *u, "a chosen candidate that was not measured");
  }
  {
    auto u = tuned();
    u->record.chosen = 7;
    expectRefused(encoded(*u), *u, "a chosen candidate it does not hold");
  }
  {
    auto u = tuned();
    std::swap(u->record.candidates[0], u->record.candidates[1]);
    expectRefused(encoded(*u), *u, "candidates out of order, the pick not first");
  }
  {
    auto u = tuned();
    u->record.candidates[1].medianSeconds = -1;
    expectRefused(encoded(*u), *u, "a negative time");
  }
  {
    auto u = tuned();
    u->record.candidates[0].summaries[0].blocks = 0;
    expectRefused(encoded(*u), *u, "a kernel without blocks");
  }
}

TEST(TuningRecord, TheKeyIsTheProgramEntrysPlusCandidatesAndMachine) {
  auto t = tuned();
  const rt::Target target = target::namedTarget("sm_90");
  const std::string base = driver::tunedEntryKey(t->graph, t->sig, target, {}, 3).canonical();
  EXPECT_NE(base, driver::programEntryKey(t->graph, t->sig, target, {}).canonical());
  EXPECT_NE(base, driver::tunedEntryKey(t->graph, t->sig, target, {}, 4).canonical());
  EXPECT_NE(
      base,
      driver::tunedEntryKey(t->graph, t->sig, target, {fusion::Mode::Basic, 0}, 3).canonical());
  rt::Target other = target;
  other.device.name = "another device";
  EXPECT_NE(driver::machineIdentity(other), driver::machineIdentity(target));
  EXPECT_NE(base, driver::tunedEntryKey(t->graph, t->sig, other, {}, 3).canonical());
  const std::vector<int64_t> shape{33, 64};
  const std::vector<ir::ConcreteInput> sig{{ir::DType::F32, shape}};
  EXPECT_NE(base, driver::tunedEntryKey(t->graph, sig, target, {}, 3).canonical());
}

TEST(TuningRecord, TheTextSaysWhatWasMeasured) {
  auto t = tuned();
  const std::string text = driver::tuningText(t->record, /*fromEntry=*/true);
  EXPECT_NE(text.find("# plan: autotuned: candidate 1 (not the cost model's pick) measured "
                      "fastest of 3 on cuda sm_90: a device, driver 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("#   candidate 1 (runs): 2 kernels, model 20 us, measured median 8 us"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("#   candidate 2: 3 kernels, model 30 us, outputs differ (y[3] is 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("read the decision from the tuning entry"), std::string::npos) << text;
  t->record.candidates.resize(1);
  t->record.chosen = 0;
  EXPECT_NE(driver::tuningText(t->record, false).find("the only candidate"), std::string::npos);
}

TEST(TuningRecord, SettingsComeFromTheEnvironmentAndOptions) {
  using stitch::testing::EnvGuard;
  {
    EnvGuard a("STITCH_AUTOTUNE", "yes");
    EnvGuard b("STITCH_AUTOTUNE_CANDIDATES", "5");
    EnvGuard c("STITCH_AUTOTUNE_BUDGET_MS", "250");
    EXPECT_EQ(driver::autotuneFromEnv(), (driver::AutotuneSettings{true, 5, 250}));
  }
  EXPECT_EQ(driver::autotuneFromEnv(), driver::AutotuneSettings{});
  for (const char* bad : {"0", "17", "three"}) {
    EnvGuard b("STITCH_AUTOTUNE_CANDIDATES", bad);
    EXPECT_THROW(driver::autotuneFromEnv(), Error) << bad;
  }
  driver::AutotuneSettings s;
  driver::parseAutotuneOption("autotune", "on", s);
  driver::parseAutotuneOption("autotune_candidates", "16", s);
  driver::parseAutotuneOption("autotune_budget_ms", "1", s);
  EXPECT_EQ(s, (driver::AutotuneSettings{true, 16, 1}));
  for (auto [key, value] :
       std::vector<std::pair<const char*, const char*>>{{"autotune", "maybe"},
                                                        {"autotune_candidates", "0"},
                                                        {"autotune_budget_ms", "600001"},
                                                        {"autotune_budget_ms", "5ms"}}) {
    try {
      driver::parseAutotuneOption(key, value, s);
      ADD_FAILURE() << key << "=" << value << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}
