#!/bin/sh
# Fit the drafts' line weights (infill_engine/drafts/lines.py, Weights) on the calibration code
# of all eight languages pooled: this Python's standard library and what lab/corpora.sh
# installs, 25 holes of each kind per folder. It prints the weights; write them into
# Weights' defaults, then refit the gates (lab/fit_gates.sh), which read the scores they give.
#
#   PATH=.venv/bin:$PATH sh lab/fit_weights.sh DEST   # DEST as given to lab/corpora.sh
#
# About 10 minutes on one core (docs/drafts.md, "The score, and the gate").
set -eu
C=${1:?usage: sh lab/fit_weights.sh DEST}/cal
S=$(python -c "import sysconfig; print(sysconfig.get_paths()['stdlib'])")
python -m dllm_lab.calibrate_drafts \
  "$S"/asyncio "$S"/email "$S"/logging "$S"/importlib "$S"/concurrent "$S"/http "$S"/xml \
  "$C"/go/* "$C"/rust/* "$C"/typescript/* "$C"/javascript/* "$C"/java/* "$C"/c/* "$C"/cpp/* \
  --language python,go,rust,typescript,javascript,java,c,cpp --holes 25 --fit
