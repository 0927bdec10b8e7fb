#!/usr/bin/env bash
# Sets up .venv from nothing: the pinned CPU torch first (any other torch requirement would
# pull GBs of CUDA packages), then the project with every extra and the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e '.[test]'
