#!/usr/bin/env bash
# test_python_pkg.sh — the kcap Python package (python/kcap) and the CLI features it leans
# on: tests/python/test_*.py under Debian's python3 with pytest. Skips (77) only when pytest
# itself is missing (make deps installs python3-pytest).
. "$(dirname "$0")/../lib.sh"
"$PY" -c 'import pytest, numpy' 2>/dev/null || skip "python3-pytest / numpy not installed"
export PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
"$PY" -m pytest -p no:cacheprovider -q -rs tests/python # its status is the test's
