#!/usr/bin/env bash
# test_python_pkg.sh — the kcap Python package (python/kcap) and the CLI features it leans
# on: tests/python/test_*.py under Debian's python3 with pytest. Skips (77) only when pytest
# itself is missing (make deps installs python3-pytest).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
"$PY" -c 'import pytest, numpy' 2>/dev/null || { echo "python3-pytest / numpy not installed"; exit 77; }
export PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
exec "$PY" -m pytest -p no:cacheprovider -q -rs tests/python
