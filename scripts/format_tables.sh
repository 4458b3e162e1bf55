#!/usr/bin/env bash
# format_tables.sh — FORMAT.md's per-call tables are generated from the call descriptions
# (kernels/vattn_desc.c) by build/tests/formats/tool_describe, between the markers
# "<!-- generated: call tables -->" and "<!-- end of generated call tables -->".
#   format_tables.sh --write   rewrite that part of formats/FORMAT.md (`make format-tables`)
#   format_tables.sh --check   exit 1 with a diff when FORMAT.md has drifted from the code
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:---check}
tool=build/tests/formats/tool_describe
doc=formats/FORMAT.md
begin='<!-- generated: call tables -->'
end='<!-- end of generated call tables -->'
[ -x "$tool" ] || { echo "format_tables: $tool not built (make all)" >&2; exit 2; }
grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc" ||
    { echo "format_tables: $doc lacks the markers '$begin' / '$end'" >&2; exit 2; }
new=$(mktemp)
trap 'rm -f "$new"' EXIT
{
    sed -n "1,/^${begin}\$/p" "$doc"
    "$tool"
    sed -n "/^${end}\$/,\$p" "$doc"
} > "$new"
case "$mode" in
--write) cp "$new" "$doc"; echo "format_tables: $doc regenerated" ;;
--check)
    if ! diff -u "$doc" "$new"; then
        echo "format_tables: $doc differs from the call descriptions: run 'make format-tables'" >&2
        exit 1
    fi
    echo "ok: $doc's call tables match the descriptions" ;;
*) echo "usage: format_tables.sh --write | --check" >&2; exit 2 ;;
esac
