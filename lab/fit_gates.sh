#!/bin/sh
# Refit the drafts' gate of every language on the calibration code that lab/corpora.sh
# installs (Python's: this Python's standard library), and write each into
# infill_engine/assets/gates.json (docs/drafts.md, "A gate per language"). Python's threshold is
# the project's decision (drafts.gate 0.3), so only its model is refitted.
#
#   PATH=.venv/bin:$PATH sh lab/fit_gates.sh DEST   # DEST as given to lab/corpora.sh
#
# About 30 minutes on one core. The same corpora, seed and line weights give the same gates:
# the gates.json shipped is what it wrote on 2026-12-07, after the line weights of
# lab/fit_weights.sh.
set -eu
C=${1:?usage: sh lab/fit_gates.sh DEST}/cal
S=$(python -c "import sysconfig; print(sysconfig.get_paths()['stdlib'])")
fit() { name=$1; shift; echo "== $name"; python -m dllm_lab.calibrate_drafts "$@" --fit-gate --write "$name"; }
fit python "$S"/asyncio "$S"/email "$S"/logging "$S"/importlib "$S"/concurrent "$S"/http "$S"/xml \
  --language python --holes 150 --threshold 0.3
fit go "$C"/go/* --language go --holes 60
fit rust "$C"/rust/* --language rust --holes 100
fit typescript "$C"/typescript/* --language typescript --holes 100
fit javascript "$C"/javascript/* --language javascript --holes 100
fit java "$C"/java/* --language java --holes 100
fit c "$C"/c/* --language c --holes 100
fit cpp "$C"/cpp/* --language cpp --holes 100
# every language without a gate of its own: one folder of each of the seven, all seven pooled
fit other "$C"/go/nethttp "$C"/rust/std "$C"/typescript/rxjs "$C"/javascript/webpack \
  "$C"/java/java.base "$C"/c/stdlib "$C"/cpp/asio \
  --language go,rust,typescript,javascript,java,c,cpp --holes 40
