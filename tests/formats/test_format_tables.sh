#!/usr/bin/env bash
# test_format_tables.sh — formats/FORMAT.md's per-call tables are what the call descriptions
# say (scripts/format_tables.sh --check): a description edited without `make format-tables`
# fails here with the diff.
exec bash "$(dirname "$0")/../../scripts/format_tables.sh" --check
