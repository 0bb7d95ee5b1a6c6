#!/usr/bin/env bash
# The README's test command: install ddlsim with its test extras, lint, format-check, run tests.
# Slow suites are marked `slow` and excluded here; run them with: python -m pytest -m slow
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[dev,calibrate]'
python3 -m ruff check .
python3 -m ruff format --check .
python3 -m pytest -q -m "not slow" "$@"
