#!/usr/bin/env bash
# Installs what tests/editors/test_llama_vim.py needs beyond the venv, idempotently (a second
# run installs nothing): curl, which llama.vim runs for every request (Debian's package, only
# when it is missing). llama.vim itself is vendored (tests/editors/vendor/llama.vim) and Neovim
# 0.11 comes from PyPI on the test's first run, so nothing else is fetched here.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
log() { printf 'setup_llama_vim: %s\n' "$*" >&2; }
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v curl >/dev/null; then
  log "installing Debian's curl (llama.vim sends its requests with it)"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q curl
fi
command -v curl >/dev/null || { log "curl is still not on PATH"; exit 1; }
[ -f "$HERE/vendor/llama.vim/autoload/llama.vim" ] || {
  log "the vendored llama.vim is missing from $HERE/vendor/llama.vim"
  exit 1
}
