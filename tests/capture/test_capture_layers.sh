#!/usr/bin/env bash
# test_capture_layers.sh — libkcap's files call only downward, with no include cycle, and no
# source file of the tree is over 650 lines.
#
# Each capture/ header has a layer (below); a file may include capture/ headers of its own
# layer or lower only (a .c file is at the layer of its own header; the CLI commands
# kcap_cmd_*.c sit above everything), and the include graph of capture/ has no
# cycle. Fails naming the file and the include that breaks the rule.
. "$(dirname "$0")/../lib.sh"
set -o pipefail
declare -A LAYER=(
  [kcap_slot.h]=0 [kcap_config.h]=0 [kcap_log.h]=0 [kcap_budget.h]=0 [kcap_ring.h]=0 [kcap_shadow_cmp.h]=0 [kcap_stage_dev.h]=0
  [kcap_names.h]=0 [kcap_state.h]=0 [kcap_tags.h]=0 [kcap_meta.h]=0 [kcap_stage_layout.h]=0
  [kcap_shadow_summary.h]=1 [kcap_shadow_load.h]=1
  [kcap_mem.h]=1 [kcap_size.h]=1 [kcap_queue.h]=1 [kcap_arm.h]=1 [kcap_gpu.h]=1 [kcap_gpu_int.h]=1
  [kcap_graphexec.h]=1
  [kcap_callrec.h]=2 [kcap_capture.h]=2 [kcap_shadow.h]=2
  [kcap_interpose.h]=3 [kcap_arm_client.h]=9 [kcap_shadow_gate.h]=9 [kcap_shadow_loadcheck.h]=9 [kcap_child.h]=9
)
own_layer() { # layer of a file: its header's, a .c file's own header's
  local b; b=$(basename "$1")
  case "$b" in
    kcap_gpu_drain.c|kcap_gpu_shadow.c|kcap_gpu_shadow_async.c|kcap_gpu_shadow_graph.c) b=kcap_gpu_int.h ;;
    kcap_interpose_graph.c) b=kcap_interpose.h ;;
    kcap_cmd_*.c) echo 9; return ;;
    *.c) b=${b%.c}.h ;;
  esac
  echo "${LAYER[$b]:-}"
}
for f in capture/*.c capture/*.h; do
  L=$(own_layer "$f")
  [ -n "$L" ] || { fail "$f has no layer in this test's table (add it)"; continue; }
  while read -r inc; do
    [ -f "capture/$inc" ] || continue
    il=${LAYER[$inc]:-}
    [ -n "$il" ] || { fail "$f includes $inc, which has no layer"; continue; }
    [ "$il" -le "$L" ] || fail "$f (layer $L) includes $inc (layer $il): calls must go downward"
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done
# cycles: depth-first search over capture/ headers
declare -A STATE=()
visit() { # $1 header, $2 path
  local h=$1 path=$2
  case "${STATE[$h]:-}" in
    1) fail "include cycle: $path -> $h"; return ;;
    2) return ;;
  esac
  STATE[$h]=1
  local inc
  for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "capture/$h"); do
    [ -f "capture/$inc" ] && visit "$inc" "$path -> $h"
  done
  STATE[$h]=2
}
for h in capture/*.h; do visit "$(basename "$h")" ""; done
# file sizes, the whole tree's sources
while read -r f; do
  n=$(wc -l < "$f")
  [ "$n" -le 650 ] || fail "$f has $n lines (650 at most: split it by purpose)"
done < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.py' '*.sh')
finish "ok: capture/ calls only downward, no include cycle, no source over 650 lines"
