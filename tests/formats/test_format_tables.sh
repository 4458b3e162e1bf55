#!/usr/bin/env bash
# test_format_tables.sh — formats/FORMAT.md's per-call tables are what the call descriptions
# say (scripts/format_tables.sh --check): a description edited without `make format-tables`
# fails here with the diff.
. "$(dirname "$0")/../lib.sh"
bash scripts/format_tables.sh --check || fail "FORMAT.md's call tables are not what the descriptions generate"
finish
