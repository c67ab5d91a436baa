// qloom validate --source DIR --quantized DIR [--target none|vllm] [--json] [--report_dir DIR]
// qloom validate --self-test
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "qloom/cli/commands.h"
#include "qloom/cli/flags.h"
#include "qloom/cli/model_spec.h"
#include "qloom/core/error.h"
#include "qloom/validate/numeric_check.h"
#include "qloom/validate/report.h"
#include "qloom/validate/self_test.h"
#include "qloom/validate/validator.h"

namespace qloom::cli {
namespace {

// Exit code when the checks ran and the verdict is FAIL (a deciding step failed).
constexpr int kValidationFailed = 4;

}  // namespace

void register_validate(CLI::App& app, CommandFn& run) {
  struct Options {
    std::string source, quantized, report_dir;
    bool json = false, self_test = false, no_numeric = false;
    unsigned threads = 0;
    std::string runtime = "simulate";
    std::string target = "none";
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "validate", "Check a Quark checkpoint against its source: tensor-name patterns, auxiliary "
                  "files, config.json, MD5 of unquantized tensors (report: validation_report.md)");
  sub->add_option(flag_names("source"), o->source, "the source model directory or hub id org/name[@revision]");
  sub->add_option(flag_names("quantized"), o->quantized, "the quantized model directory");
  sub->add_option(flag_names("report_dir"), o->report_dir,
                  "also write validation_report.md and validation_report.json here");
  sub->add_flag(flag_names("json"), o->json, "print the JSON report instead of markdown");
  sub->add_option(flag_names("threads"), o->threads, "hashing threads (0 = all cores)");
  sub->add_flag(flag_names("no_numeric"), o->no_numeric,
                "skip step 5 (dequantize every quantized weight and compare with the source)");
  sub->add_option(flag_names("runtime"), o->runtime,
                  "step 5's engine window: simulate (Quark's arithmetic, default) or native (the engine's "
                  "quantized kernels)")
      ->check(CLI::IsMember({"simulate", "native"}));
  sub->add_option(flag_names("target"), o->target,
                  "the deployment target the verdict covers: none (default; steps 1-5 decide PASS / FAIL and step 6 "
                  "is reported as \"deployable on vLLM 0.33: yes / no — <reason>\"), or vllm (a step-6 failure, "
                  "a checkpoint vLLM 0.33 would refuse or misload, fails the verdict too: exit 4)")
      ->check(CLI::IsMember({"none", "vllm"}));
  sub->add_flag(flag_names("self_test"), o->self_test,
                "run the validator on a generated model and broken copies of it");
  sub->callback([o, &run] {
    run = [o] {
      validate::ValidationReport report;
      if (o->self_test) {
        char tmpl[] = "/tmp/qloom-validate-self-test-XXXXXX";
        const char* dir = ::mkdtemp(tmpl);
        if (dir == nullptr) throw_errno(errno, "/tmp", "mkdtemp", true);
        try {
          report = validate::run_validator_self_test(dir);
        } catch (...) {
          std::filesystem::remove_all(dir);
          throw;
        }
        std::filesystem::remove_all(dir);
      } else {
        if (o->quantized.empty())
          throw Error(ErrorKind::kUsage, "", "--quantized", "no quantized model directory given",
                      "pass --quantized DIR (and --source DIR), or --self-test");
        validate::ValidateOptions vo;
        vo.threads = o->threads;
        vo.target = validate::parse_deploy_target(o->target);
        if (!o->no_numeric) {
          const exporter::Runtime rt = exporter::parse_runtime(o->runtime);
          vo.numeric_step = [rt](const io::ModelDir& s, const io::ModelDir& q) {
            return validate::check_dequantized_weights_on(s, q, rt);
          };
        }
        report = validate::validate_checkpoint(resolve_model_arg(o->source, io::HubFetch::kModel),
                                               o->quantized, vo);
      }
      if (!o->report_dir.empty()) validate::write_validation_report(report, o->report_dir);
      if (o->json)
        std::cout << validate::report_to_json(report).dump(2) << "\n";
      else
        std::cout << validate::render_markdown(report);
      return report.passed() ? 0 : kValidationFailed;
    };
  });
}

}  // namespace qloom::cli
