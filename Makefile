# qloom — top-level entry points. Each target runs scripts/setup first, which
# installs what is missing (Debian packages, the test venv) and configures.
#
#   make demo      set up, build only the CLI (qloom_cli + libqloom), run
#                  `qloom run "<prompt>"` on the bundled tiny model
#   make test      set up, build, run the suite (CTest, all but the `full` label) + a short fuzz run
#   make test-full set up, build, run every test, the `full` sweeps included
#   make bench     set up, build, run the benchmarks (figures, not pass/fail)
#   make build     set up and build
#   make fuzz      libFuzzer on every target in FUZZ_TARGETS (FUZZ_SECONDS=300 each)
#   make sanitize  the whole suite under an ASan+UBSan build (build-asan/)
#   make clean     remove build directories

BUILD       ?= build
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
DEMO_MODEL  ?= models/stories260K-hf-bf16
FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 36

.PHONY: all setup setup-demo build build-demo demo test test-full bench fuzz fuzz-build fuzz-smoke sanitize interop clean install

all: build

setup:
	@scripts/setup --build-dir $(BUILD)

build: setup
	cmake --build $(BUILD) -j $(JOBS)

# The demo needs the CLI alone: no tests, benchmarks, tools or fuzzers, and no
# test venv and no real test model (make test adds both later in the same build dir).
setup-demo:
	@scripts/setup --build-dir $(BUILD) --no-venv --no-real

build-demo: setup-demo
	cmake --build $(BUILD) -j $(JOBS) --target qloom_cli

# PREFIX/bin/qloom, PREFIX/lib/libqloom.a, PREFIX/share/qloom/{data,models}.
PREFIX ?= /usr/local
install: build-demo
	cmake --install $(BUILD) --prefix $(PREFIX)

DEMO_WS     ?= $(BUILD)/demo/workspace
DEMO_PROMPT ?= quantize the bundled model to fp8 with fp8 kv cache, calibrate on 64 samples, measure perplexity on 20 samples, accept a 10% perplexity gap

# The main job on the bundled model, from a sentence: qloom run goes through
# intake, plan, manifest, exec (calibrated FP8 weights/activations + FP8 KV
# cache), export, validate and eval (source vs quantized perplexity, paired),
# non-interactively, and prints the summary; every artifact is in DEMO_WS.
demo: build-demo
	./$(BUILD)/qloom run "$(DEMO_PROMPT)" --workspace $(DEMO_WS) --interactive off
	@ls $(DEMO_WS)

# The short fuzz run goes first so that CTest's summary closes the output.
test: build
	@$(MAKE) --no-print-directory fuzz-smoke
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE full

# Every test: the `full` label holds the sweeps that add coverage but no new
# code path (every algorithm x scheme, long calibrations, full-size variants).
test-full: build
	@$(MAKE) --no-print-directory fuzz-smoke
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	cmake --build $(BUILD) -j $(JOBS) --target qloom_benches
	./$(BUILD)/bench/run_benches

# libFuzzer needs clang; its build lives apart from the gcc one.
build-fuzz/CMakeCache.txt:
	@scripts/setup --build-dir $(BUILD) >/dev/null
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -DQLOOM_FUZZ=ON -DQLOOM_BUILD_TESTS=OFF \
	  -DQLOOM_BUILD_BENCH=OFF >/dev/null

# The libFuzzer targets: name:dict:corpus, the binary being qloom_fuzz_<name>
# (fuzz/CMakeLists.txt), its dictionary fuzz/<dict>.dict, its seeds fuzz/<corpus>.
FUZZ_TARGETS = safetensors_header:safetensors:corpus gguf_header:gguf:corpus_gguf \
  tokenizer_json:tokenizer:corpus_tokenizer http_request:http:corpus_http \
  serve_request:serve_request:corpus_serve_request \
  jinja_render:jinja:corpus_jinja config_json:config:corpus_config
fuzz_name = $(word 1,$(subst :, ,$(1)))
fuzz_dict = $(word 2,$(subst :, ,$(1)))
fuzz_corpus = $(word 3,$(subst :, ,$(1)))

fuzz-build: build-fuzz/CMakeCache.txt
	cmake --build build-fuzz -j $(JOBS) --target $(foreach t,$(FUZZ_TARGETS),qloom_fuzz_$(call fuzz_name,$(t)))

# Every target, FUZZ_SECONDS each; new inputs land in fuzz/<corpus>-work (git-ignored).
fuzz: fuzz-build
	@set -e; $(foreach t,$(FUZZ_TARGETS),mkdir -p fuzz/$(call fuzz_corpus,$(t))-work; \
	  ./build-fuzz/fuzz/qloom_fuzz_$(call fuzz_name,$(t)) -max_total_time=$(FUZZ_SECONDS) \
	  -dict=fuzz/$(call fuzz_dict,$(t)).dict -print_final_stats=1 \
	  fuzz/$(call fuzz_corpus,$(t))-work fuzz/$(call fuzz_corpus,$(t));)

# Every target within FUZZ_SMOKE_SECONDS in all (an equal share each).
FUZZ_SMOKE_EACH = $(shell echo $$(( ($(FUZZ_SMOKE_SECONDS) + $(words $(FUZZ_TARGETS)) - 1) / $(words $(FUZZ_TARGETS)) )))
fuzz-smoke: fuzz-build
	@$(foreach t,$(FUZZ_TARGETS),( $(call fuzz_smoke_one,$(call fuzz_name,$(t)),qloom_fuzz_$(call fuzz_name,$(t)),$(call fuzz_dict,$(t)).dict,$(call fuzz_corpus,$(t))) ) && ) true

# $(call fuzz_smoke_one,label,binary,dict,corpus dir)
define fuzz_smoke_one
echo "fuzz: $(1) for $(FUZZ_SMOKE_EACH)s" && tmp=$$(mktemp -d) && ./build-fuzz/fuzz/$(2) \
  -max_total_time=$(FUZZ_SMOKE_EACH) -dict=fuzz/$(3) -print_final_stats=1 $$tmp fuzz/$(4) \
  2>$$tmp.log; rc=$$?; grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' $$tmp.log || true; \
  if [ $$rc -ne 0 ]; then tail -50 $$tmp.log; fi; rm -rf $$tmp $$tmp.log; exit $$rc
endef

sanitize:
	@scripts/setup --build-dir build-asan --cmake-arg -DQLOOM_SANITIZE=ON --cmake-arg -DQLOOM_BUILD_BENCH=OFF
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) build-fuzz build-asan

# Light oracles (safetensors, in build/venv) always; the heavy check (amd-quark,
# torch, transformers loading qloom's checkpoints) with QLOOM_HEAVY_PYTHON set
# to a Python that has them, else it reports SKIPPED.
QLOOM_HEAVY_PYTHON ?=
# The compressed-tensors export check (llm-compressor's package): QLOOM_CT_PYTHON, default the same Python.
QLOOM_CT_PYTHON ?= $(QLOOM_HEAVY_PYTHON)
interop: build
	cd $(BUILD) && ctest --output-on-failure -L interop
	@if [ -n "$(QLOOM_HEAVY_PYTHON)" ]; then \
	  $(QLOOM_HEAVY_PYTHON) tests/interop/quark_load_check.py --qloom ./$(BUILD)/qloom \
	    --demo-model $(DEMO_MODEL) --engine-logits ./$(BUILD)/tests/interop/engine_logits; \
	else echo "SKIPPED: heavy Quark load check (set QLOOM_HEAVY_PYTHON=/path/to/python with amd-quark, torch, transformers)"; fi
	@if [ -n "$(QLOOM_CT_PYTHON)" ]; then \
	  $(QLOOM_CT_PYTHON) tests/interop/compressed_tensors_check.py --qloom ./$(BUILD)/qloom \
	    --ct-tool ./$(BUILD)/tests/interop/ct_tool --engine-logits ./$(BUILD)/tests/interop/engine_logits \
	    --demo-model $(DEMO_MODEL); \
	else echo "SKIPPED: heavy compressed-tensors check (set QLOOM_CT_PYTHON=/path/to/python with compressed-tensors, torch, transformers)"; fi
