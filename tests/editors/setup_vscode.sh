#!/usr/bin/env bash
# Installs what tests/editors/test_vscode.py needs, idempotently (a second run installs nothing):
#   build/code-server/   code-server 4.100.3 from npm (VS Code 1.100 in a browser; it needs Node 20)
#   build/vscode-e2e/    puppeteer-core from npm, which drives Debian's chromium (it downloads no
#                        browser of its own)
#   vscode-client/dllm-infill-<version>.vsix   the extension, packaged offline with @vscode/vsce
#                        (a devDependency of vscode-client), rebuilt on every run
# and the Debian packages it uses, only when they are missing: chromium, ripgrep, libkrb5-dev
# (kerberos, a native module of VS Code), a C++ toolchain and Node's headers for node-gyp.
#
# code-server's postinstall builds VS Code's native modules and runs a few downloaders; offline
# (only the npm registry reachable) each is pointed at something local:
#   npm_config_nodedir   node-gyp takes Node's headers from here instead of downloading them
#   npm_config_yes       node-pty's post-install runs `npx node-gyp`; without a TTY npx refuses to
#                        fetch node-gyp (from the npm registry) unless told yes
#   TMPDIR               @vscode/ripgrep's postinstall looks for its release archive in
#                        $TMPDIR/vscode-ripgrep-cache-<version>/ before it downloads one; we put
#                        an archive of Debian's rg there
#   npm_config_unsafe_perm   as root, install scripts run as root
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${DLLM_VSCODE_BUILD:-$ROOT/build}"
CODE_SERVER_VERSION=4.100.3
PUPPETEER_VERSION=24.43.1
# What code-server 4.100.3's VS Code pins: @vscode/ripgrep 1.15.11, which fetches ripgrep v13.0.0-10.
RIPGREP_PKG_VERSION=1.15.11
RIPGREP_RELEASE=v13.0.0-10

log() { printf 'setup_vscode: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# --- Debian packages -----------------------------------------------------------------------
missing=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
command -v chromium >/dev/null || missing+=(chromium)
command -v rg >/dev/null || missing+=(ripgrep)
have_pkg libkrb5-dev || missing+=(libkrb5-dev)
command -v g++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
command -v python3 >/dev/null || missing+=(python3)

if ! command -v node >/dev/null; then
  log "node is not installed; code-server $CODE_SERVER_VERSION needs Node.js 20"
  exit 1
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" != 20 ]; then
  log "code-server $CODE_SERVER_VERSION needs Node.js 20; this is $(node -v)"
  exit 1
fi
# The prefix node was installed under; its include/node/ holds the headers node-gyp builds against.
NODEDIR="$(node -p 'require("path").resolve(process.execPath, "..", "..")')"
[ -f "$NODEDIR/include/node/node_api.h" ] || missing+=(libnode-dev)

if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -q
  # With recommends, as tested: chromium's fonts among them.
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
[ -f "$NODEDIR/include/node/node_api.h" ] || NODEDIR=/usr
if [ ! -f "$NODEDIR/include/node/node_api.h" ]; then
  log "no Node.js headers in $NODEDIR/include/node (package libnode-dev)"
  exit 1
fi

mkdir -p "$BUILD"

# --- code-server ---------------------------------------------------------------------------
CS="$BUILD/code-server"
if [ ! -f "$CS/.installed-$CODE_SERVER_VERSION" ]; then
  log "installing code-server $CODE_SERVER_VERSION into $CS (native modules build; minutes)"
  rm -rf "$CS"
  mkdir -p "$CS/tmp/vscode-ripgrep-cache-$RIPGREP_PKG_VERSION" "$CS/tmp/rg"
  case "$(node -p process.arch)" in
    x64) rg_target=x86_64-unknown-linux-musl ;;
    arm64) rg_target=aarch64-unknown-linux-musl ;;
    *) log "no ripgrep target for $(node -p process.arch)"; exit 1 ;;
  esac
  cp "$(command -v rg)" "$CS/tmp/rg/rg"
  tar czf "$CS/tmp/vscode-ripgrep-cache-$RIPGREP_PKG_VERSION/ripgrep-$RIPGREP_RELEASE-$rg_target.tar.gz" \
    -C "$CS/tmp/rg" rg
  (
    cd "$CS"
    TMPDIR="$CS/tmp" npm_config_nodedir="$NODEDIR" npm_config_yes=true npm_config_unsafe_perm=true \
      npm install --prefix "$CS" --no-audit --no-fund --loglevel=error \
      "code-server@$CODE_SERVER_VERSION"
  )
  "$CS/node_modules/.bin/code-server" --version >/dev/null
  rm -rf "$CS/tmp"
  touch "$CS/.installed-$CODE_SERVER_VERSION"
fi

# --- puppeteer-core ------------------------------------------------------------------------
E2E="$BUILD/vscode-e2e"
if [ ! -f "$E2E/.installed-$PUPPETEER_VERSION" ]; then
  log "installing puppeteer-core $PUPPETEER_VERSION into $E2E"
  rm -rf "$E2E"
  mkdir -p "$E2E"
  npm install --prefix "$E2E" --no-audit --no-fund --loglevel=error \
    "puppeteer-core@$PUPPETEER_VERSION"
  touch "$E2E/.installed-$PUPPETEER_VERSION"
fi

# --- the extension's .vsix -----------------------------------------------------------------
CLIENT="$ROOT/vscode-client"
if [ ! -f "$CLIENT/node_modules/.package-lock.json" ] ||
  [ "$CLIENT/package-lock.json" -nt "$CLIENT/node_modules/.package-lock.json" ]; then
  log "npm ci in vscode-client"
  (cd "$CLIENT" && npm ci --no-audit --no-fund --loglevel=error --omit=optional)
fi
(cd "$CLIENT" && npm run --silent package >/dev/null)
VSIX="$CLIENT/dllm-infill-$(node -p "require('$CLIENT/package.json').version").vsix"
[ -f "$VSIX" ]
log "ready: $CS/node_modules/.bin/code-server, $E2E/node_modules/puppeteer-core, $VSIX"
