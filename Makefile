# The two commands: `make demo` and `make test`. Both set up .venv on first use: the demo
# what it runs with, the tests that plus their tools (the [dev] extra).
PY := .venv/bin/python
PIP := .venv/bin/pip
RUN_STAMP := .venv/.installed-run
DEV_STAMP := .venv/.installed-dev

.PHONY: demo test lint setup clean

setup: $(DEV_STAMP)

# pip takes a CPU torch from local disk only when pinned; a bare `torch` may pull CUDA.
define VENV_WITH_TORCH
	test -x $(PY) || python3 -m venv .venv
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q torch==2.13.0
endef

$(RUN_STAMP): pyproject.toml
	$(VENV_WITH_TORCH)
	$(PIP) install -q -e ".[launchers,gguf]"
	touch $(RUN_STAMP)

# The tests' tools and the rest in one install (one resolve and one editable build).
$(DEV_STAMP): pyproject.toml
	$(VENV_WITH_TORCH)
	$(PIP) install -q -e ".[launchers,gguf,dev]"
	touch $(RUN_STAMP) $(DEV_STAMP)

demo: $(RUN_STAMP)
	WANDB_MODE=offline .venv/bin/grpo-ablate demo

# pytest-xdist workers: one per core this process may use (at most 4). One more worker than
# cores starved the Slurm requeue test's one-minute jobs. TEST_WORKERS=1: one worker.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n > 4 ? 4 : n )))

# The slurm tests run against a one-machine Slurm that scripts/slurm_local.sh sets up (root
# and apt needed); where it cannot, they are skipped and the summary says so. SLURM=0: skip.
# The tests start a hundred-odd Python processes that import the project: it is compiled once
# first, since where PYTHONDONTWRITEBYTECODE is set each would compile it again (a second each).
test: $(DEV_STAMP)
	.venv/bin/ruff check grpo_ablate hydra_plugins tests scripts
	.venv/bin/lint-imports --no-cache   # the layers of docs/architecture.md: imports go down only
	$(PY) -m compileall -q grpo_ablate hydra_plugins tests
	@if [ "$${SLURM:-1}" = 1 ]; then bash scripts/slurm_local.sh \
	    || echo "make test: no Slurm on this machine (see above): the slurm tests will be skipped"; fi
	WANDB_MODE=offline $(PY) -m pytest -m "not gpu" -q --durations=12 \
	    -n $(TEST_WORKERS)

lint: $(DEV_STAMP)
	.venv/bin/ruff check .

clean:
	rm -rf outputs .pytest_cache
