#!/usr/bin/env bash
# Fuzzes the HTTP API with schemathesis (from PyPI, in a venv under $TDP_FUZZ_HOME, default
# ~/.cache/tdp-fuzz) against a real `tdp server` on a temporary embedded PostgreSQL; see docs/testing.md.
# Options after the script go to `schemathesis run` (e.g. --max-examples 200, --seed N, --include-path X).
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.32.5
home="${TDP_FUZZ_HOME:-$HOME/.cache/tdp-fuzz}"
venv="$home/venv-$version"
if [ ! -x "$venv/bin/schemathesis" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version"
fi
# run.ts starts schemathesis through scripts/fuzz/schemathesis_cli.py with the venv's Python.
exec node --conditions=@tdp/source --import tsx scripts/fuzz/run.ts "$venv/bin/python" "$@"
