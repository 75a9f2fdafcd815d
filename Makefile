# One command per stage, most of them a script of scripts/ (each the same code as a `seq2seq`
# subcommand). Every target sets up .venv first when it is missing.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
SEQ2SEQ := $(VENV)/bin/seq2seq
STAMP := $(VENV)/.installed

.PHONY: install chromium test test-fast lint data train translate serve explore bench speedrun \
	speedrun-wheels tensorboard

install: $(STAMP) chromium

# torch is installed on its own first, so that the project's dependencies find it and never
# pull another (CUDA) build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

# The explorer's browser tests drive Debian's chromium: installed here where missing (as root),
# else named. Playwright only drives it; it never downloads a browser.
CHROMIUM := /usr/bin/chromium
chromium:
	@test -x $(CHROMIUM) || [ "$$(id -u)" != 0 ] || \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)
	@test -x $(CHROMIUM) || echo "note: $(CHROMIUM) is missing; the browser tests need it (as root: apt-get install chromium)"

# The whole suite (as CI runs it), on two worker processes, then its 15 slowest tests.
test: $(STAMP) chromium
	$(PY) -m pytest -n 2 --dist worksteal --durations=15

# The unit tests: those not marked slow (no Python started that imports torch, no whole corpus
# prepared, no training for seconds), on two worker processes as the whole suite.
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" -n 2 --dist worksteal

LINT_PATHS := seq2seq tests benchmarks examples scripts
lint: $(STAMP)
	$(PY) -m ruff check $(LINT_PATHS)
	$(PY) -m ruff format --check $(LINT_PATHS)

# make data [CORPUS=multi30k SRC=en TGT=de] [MIRROR=dir|url] [ARGS="--vocab-size 16000 ..."]
# Writes data/$(CORPUS).$(SRC)-$(TGT)/; run again to reuse it (nothing is redone).
CORPUS ?= multi30k
SRC ?= en
TGT ?= de
data: $(STAMP)
	SEQ2SEQ_MAKE_TARGET=data $(PY) scripts/prepare_data.py --corpus $(CORPUS) --src $(SRC) --tgt $(TGT) $(if $(MIRROR),--mirror $(MIRROR)) $(ARGS)

# make train MODEL=transformer|gru [CONFIG=file.toml] [ARGS="train.lr=1e-3 ..."] [MIRROR=dir|url]
# Prepares the configuration's corpus first when it is missing; run again to resume. Where
# PyTorch sees no CUDA GPU (CUDA=0; asked of torch when the recipe runs, unless given), CONFIG
# is the CPU recipe configs/$(MODEL).multi30k.en-de.cpu.toml when there is one.
# Ctrl-C: `set -m` as for serve, so only the training gets the SIGINT; it saves and exits with
# 130, and make, which would say "Error 130", is stopped by the same signal instead: it exits
# with the training's status and says nothing (the `sleep` lets it stop before the shell ends).
MODEL ?= transformer
CUDA ?= $(shell $(PY) -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null)
CPU_CONFIG = $(wildcard configs/$(MODEL).multi30k.en-de.cpu.toml)
CONFIG ?= $(or $(if $(CPU_CONFIG),$(if $(filter 1,$(CUDA)),,$(CPU_CONFIG))),configs/$(MODEL).multi30k.en-de.toml)
train: $(STAMP)
	{ set -m; } 2>/dev/null; SEQ2SEQ_MAKE_TARGET=train $(if $(MIRROR),SEQ2SEQ_DATA_MIRROR=$(MIRROR)) $(PY) scripts/train.py --config $(CONFIG) --prepare $(ARGS); \
		status=$$?; [ $$status != 130 ] || { kill -INT $$PPID; sleep 1; exit 0; }; exit $$status

# make translate [NAME=transformer-tiny.multi30k.en-de] [ARGS="--beam 1 ..."]
# Interactive translation with a shipped model (NAME: transformer-tiny.multi30k.en-de, or another
# in `.venv/bin/python scripts/translate.py --help`), its attention map shown.
NAME ?= transformer-tiny.multi30k.en-de
translate: $(STAMP)
	$(PY) scripts/translate.py --model $(NAME) --show-attention $(ARGS)

# make serve [SERVE_MODELS="transformer-tiny.multi30k.en-de ..."] [ARGS="--port 8080 ..."]
# Serves the shipped models over HTTP on 127.0.0.1:8000 (docs/serve.md), the first one the
# default; Ctrl-C stops it, with exit status 0. `set -m` runs the server in a process group of
# its own, the terminal's foreground one, so Ctrl-C reaches only the server: make, which would
# die of the SIGINT (status 130), waits for it and exits with its status.
SERVE_MODELS ?= transformer-tiny.multi30k.en-de transformer-tiny.multi30k.de-en \
	transformer-small.tatoeba.en-fr transformer-small.tatoeba.fr-en gru-small.multi30k.en-de
serve: $(STAMP)
	{ set -m; } 2>/dev/null; $(SEQ2SEQ) serve $(foreach model,$(SERVE_MODELS),--model $(model)) $(ARGS)

# make explore [ARGS="--port 8080 ..."]
# The attention explorer (docs/explore.md) with every shipped model, en-de first (the page's
# default): http://127.0.0.1:8000/; Ctrl-C stops it, with exit status 0 (see serve).
explore: $(STAMP)
	{ set -m; } 2>/dev/null; $(SEQ2SEQ) explore $(ARGS)

# make bench [ARGS="--quick" | ARGS="--growth" | ARGS="--checkpoint-dir checkpoints"] [MIRROR=dir|url]
# Prepares Multi30k en-de first when it is missing; writes results/bench/<device>-<time>.json.
BENCH_DATA := data/multi30k.en-de
bench: $(STAMP) $(BENCH_DATA)/manifest.json
	$(PY) benchmarks/bench.py $(ARGS)

# make speedrun [ARGS="--seeds 3" | ARGS="--dry-run" | ARGS="--set train.max_steps=1200"]
# The speed record (docs/benchmarks.md, "The speed record"): Multi30k en-de from process start to
# the test score, 3 seeds; writes results/bench/speedrun-<device>-<time>.json. On a GPU machine
# without this .venv, run benchmarks/speedrun.py as its first lines say.
speedrun: $(STAMP) $(BENCH_DATA)/manifest.json
	$(PY) benchmarks/speedrun.py $(ARGS)

# make speedrun-wheels: the packages the GPU machine lacks (the number guard's and the sentence
# splitter's), as wheels for its Python 3.12 in .whl/, which the speedrun carries there.
SPEEDRUN_WHEELS := num2words==0.5.14 text2num==3.1.0 sentencex==1.0.32
speedrun-wheels: $(STAMP)
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
		--implementation cp --platform manylinux_2_17_x86_64 -d .whl $(SPEEDRUN_WHEELS)

$(BENCH_DATA)/manifest.json: | $(STAMP)
	SEQ2SEQ_MAKE_TARGET=bench $(PY) scripts/prepare_data.py --corpus multi30k --src en --tgt de --out $(BENCH_DATA) $(if $(MIRROR),--mirror $(MIRROR))

PORT ?= 6006
tensorboard: $(STAMP)
	$(VENV)/bin/tensorboard --logdir checkpoints --port $(PORT)
