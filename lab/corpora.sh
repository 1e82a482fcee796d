#!/bin/sh
# The code the drafts' gates are calibrated on and measured on, in every language of the
# grammars, from this machine's registries (Debian's packages, npm, PyPI): docs/drafts.md,
# "Every language". Calibration folders are never measured on, nor the other way round.
#
#   sh lab/corpora.sh DEST     # DEST/cal/LANG/PACKAGE and DEST/held/LANG/PACKAGE (about 1 GB)
#
# Then, per language:
#   python -m dllm_lab.calibrate_drafts DEST/cal/go/* --language go --fit-gate --write go
#   python -m dllm_lab.eval_drafts DEST/held/go/* --language go --holes 60
set -eu
DEST=${1:?usage: sh lab/corpora.sh DEST}
mkdir -p "$DEST" && cd "$DEST" && DEST=$(pwd)
apt-get install -y -qq --no-install-recommends golang-1.19-src rust-src openjdk-17-source \
  glibc-source libboost1.74-dev golang-github-spf13-cobra-dev golang-github-sirupsen-logrus-dev \
  golang-github-gorilla-mux-dev librust-regex-dev librust-clap-dev librust-serde-dev \
  librust-rand-dev golang-github-stretchr-testify-dev golang-github-spf13-pflag-dev \
  golang-github-gorilla-websocket-dev golang-gopkg-yaml.v3-dev golang-github-google-go-cmp-dev \
  golang-github-burntsushi-toml-dev golang-github-pelletier-go-toml-dev \
  golang-github-spf13-viper-dev librust-bytes-dev librust-hashbrown-dev librust-indexmap-dev \
  librust-petgraph-dev librust-rayon-dev librust-crossbeam-channel-dev >/dev/null
NPM="$DEST/npm"
mkdir -p "$NPM" && cd "$NPM"
for p in rxjs webpack eslint moment fastify pino ws undici underscore zod effect \
  @tanstack/query-core express axios mocha koa commander cordova-android @capacitor/android \
  react-native-webview libxmljs2 ffi-napi classic-level canvas node-pty re2 cld \
  @parcel/watcher better-sqlite3 immer mobx @reduxjs/toolkit argon2 secp256k1 node-expat lz4; do
  npm pack --silent "$p" >/dev/null
done
for f in *.tgz; do mkdir -p "x/${f%.tgz}" && tar -xzf "$f" -C "x/${f%.tgz}"; done
x() { ls -d "$NPM"/x/"$1"-[0-9]*/package | head -n 1; }
cd "$DEST" && mkdir -p cal/go cal/rust cal/java cal/c cal/cpp cal/typescript cal/javascript \
  held/go held/rust held/java held/c held/cpp held/typescript held/javascript held/python
GO=/usr/share/go-1.19/src
cp -r $GO/net/http cal/go/nethttp && cp -r $GO/go cal/go/goparse
cp -r $GO/encoding cal/go/encoding && cp -r $GO/cmd/go/internal cal/go/cmdgo
for d in crypto/tls os fmt strings bytes time text/template database/sql archive/tar \
  compress/flate net/url net/smtp image/png sort bufio; do
  cp -r "$GO/$d" "cal/go/$(echo "$d" | tr / _)"
done
RS=/usr/lib/rustlib/src/rust/library
cp -rL $RS/alloc cal/rust/alloc && cp -rL $RS/std cal/rust/std && cp -rL $RS/core cal/rust/core
for c in bytes hashbrown indexmap petgraph rayon crossbeam-channel; do
  cp -rL "$(ls -d /usr/share/cargo/registry/$c-[0-9]* | head -n 1)" "cal/rust/x_$(echo "$c" | tr -d -)"
done
(cd cal/java && unzip -q /usr/lib/jvm/java-17-openjdk-amd64/lib/src.zip 'java.base/java/util/*' \
  'java.base/java/io/*' 'java.net.http/*' 'java.sql/*')
tar -xJf /usr/src/glibc/glibc-2.36.tar.xz -C "$DEST" glibc-2.36/malloc glibc-2.36/string \
  glibc-2.36/stdlib glibc-2.36/posix glibc-2.36/libio glibc-2.36/resolv
for d in malloc string stdlib posix libio resolv; do mv "glibc-2.36/$d" "cal/c/$d"; done
for d in asio beast filesystem date_time; do cp -r "/usr/include/boost/$d" "cal/cpp/$d"; done
cp -r "$(x re2)/vendor/re2/re2" cal/cpp/re2 && cp -r "$(x re2)/vendor/abseil-cpp/absl" cal/cpp/abseil
cp -r "$(x cld)/deps/cld/internal" cal/cpp/cld && cp -r "$(x parcel-watcher)/src" cal/cpp/parcelwatcher
cp -r "$(x better-sqlite3)/src" cal/cpp/bettersqlite3
cp -r "$(x rxjs)/src" cal/typescript/rxjs
cp -r "$(x immer)/src" cal/typescript/immer && cp -r "$(x mobx)/src" cal/typescript/mobx
cp -r "$(x reduxjs-toolkit)/src" cal/typescript/reduxtoolkit
cp -r "$(x argon2)/argon2/src" cal/c/x_argon2 && cp -r "$(x node-expat)/deps/libexpat" cal/c/x_expat
cp -r "$(x secp256k1)/src/secp256k1/src" cal/c/x_secp256k1 && cp -r "$(x lz4)/deps/lz4" cal/c/x_lz4
cp -r "$(x webpack)/lib" cal/javascript/webpack && cp -r "$(x eslint)/lib" cal/javascript/eslint
cp -r "$(x moment)/src" cal/javascript/moment
for p in fastify pino ws undici; do cp -r "$(x $p)/lib" "cal/javascript/$p"; done
cp -r "$(x underscore)/modules" cal/javascript/underscore
GC=/usr/share/gocode/src/github.com
for d in stretchr/testify spf13/pflag gorilla/websocket google/go-cmp BurntSushi/toml \
  pelletier/go-toml spf13/viper; do
  cp -rL "$GC/$d" "cal/go/x_$(basename "$d" | tr -d -)"
done
cp -rL /usr/share/gocode/src/gopkg.in/yaml.v3 cal/go/x_yaml
cp -rL $GC/spf13/cobra held/go/cobra && cp -rL $GC/sirupsen/logrus held/go/logrus
cp -rL $GC/gorilla/mux held/go/mux
for c in regex clap serde rand; do
  cp -rL "$(ls -d /usr/share/cargo/registry/$c-[0-9]* | head -n 1)" "held/rust/$c"
done
cp -r "$(x zod)" held/typescript/zod && cp -r "$(x effect)/src" held/typescript/effect
cp -r "$(x tanstack-query-core)/src" held/typescript/query-core
cp -r "$(x express)" held/javascript/express
for p in axios mocha koa commander; do cp -r "$(x $p)/lib" "held/javascript/$p"; done
cp -r "$(x cordova-android)/framework" held/java/cordova
cp -r "$(x capacitor-android)" held/java/capacitor
cp -r "$(x react-native-webview)/android" held/java/rnwebview
cp -r "$(x libxmljs2)/vendor" held/c/libxml2 && cp -r "$(x ffi-napi)/deps" held/c/libffi
cp -r "$(x classic-level)/deps" held/cpp/leveldb && cp -r "$(x canvas)/src" held/cpp/canvas
cp -r "$(x node-pty)/src" held/cpp/nodepty
# Python: packages neither installed here nor in the builtin model's corpus.
pip download -q --no-deps --only-binary :all: -d "$DEST/wheels" boltons toolz marshmallow
for w in "$DEST"/wheels/*.whl; do unzip -q -o "$w" -d "$DEST/wheels/x"; done
for p in boltons toolz marshmallow; do cp -r "$DEST/wheels/x/$p" "held/python/$p"; done
echo "corpora in $DEST"
