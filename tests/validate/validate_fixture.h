// Shared set-up for the validator tests: the demo model as the source and a
// fake Quark FP8 checkpoint of it (optionally with a planted defect) in a
// TempDir.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "qloom/validate/self_test.h"
#include "qloom/validate/validator.h"
#include "support/temp_dir.h"

namespace qloom::test {

class ValidateFixture {
 public:
  ValidateFixture() : tmp_("validate") {}

  static std::filesystem::path demo() { return QLOOM_DEMO_MODEL_DIR; }
  const TempDir& tmp() const { return tmp_; }

  // A fake Quark checkpoint of the demo model at tmp/<name>.
  std::filesystem::path make(const std::string& name,
                             const validate::FakeQuarkOptions& opts = {}) const {
    const auto out = tmp_ / name;
    validate::write_fake_quark_checkpoint(demo(), out, opts);
    return out;
  }

  // A copy of the demo model (weights included) at tmp/<name>.
  std::filesystem::path copy_demo(const std::string& name) const {
    const auto out = tmp_ / name;
    std::filesystem::copy(demo(), out);
    return out;
  }

  static validate::ValidationReport run(const std::filesystem::path& q,
                                        const validate::ValidateOptions& o = {}) {
    return validate::validate_checkpoint(demo(), q, o);
  }

  static nlohmann::ordered_json read_json(const std::filesystem::path& p) {
    return nlohmann::ordered_json::parse(read_file(p));
  }
  static void write_json(const std::filesystem::path& p, const nlohmann::ordered_json& j) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << j.dump(2) << "\n";
  }

 private:
  TempDir tmp_;
};

// "ok" / "FAIL" / "skipped" of step `n`, or "absent".
inline std::string status_of(const validate::ValidationReport& r, int n) {
  const auto* s = r.step(n);
  return s ? validate::status_name(s->status) : "absent";
}

// Statuses of steps 4, 1, 3, 2, 5 as one string, e.g. "ok ok FAIL ok skipped".
inline std::string statuses(const validate::ValidationReport& r) {
  std::string s;
  for (int n : {4, 1, 3, 2, 5}) {
    if (!s.empty()) s += ' ';
    s += status_of(r, n);
  }
  return s;
}

}  // namespace qloom::test
