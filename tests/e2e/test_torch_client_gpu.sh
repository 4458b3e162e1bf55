#!/usr/bin/env bash
# test_torch_client_gpu.sh — the torch + ctypes client (the way SGLang calls the kernel) on the
# GPU under `kcap record`, eager and CUDA-graph modes:
#  - the client's own checks pass (float64 reference; graph replays == eager calls bitwise);
#  - every snapshot validates, holds exactly the outputs the client got (read through h5py +
#    the filter plugin), and eager snapshots replay bitwise equal on the same CUDA build;
#  - graph mode: calls made inside CUDA graph capture are recorded at graph replays.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${KCAP_BUILD:-build}
PY=${GPU_PYTHON:-python3}
$PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "skip: no torch with CUDA"; exit 77; }
KCAP=$B/bin/kcap
LIB=$B/lib/libverify_attn.so
export HDF5_PLUGIN_PATH=$PWD/$B/plugins
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
CL=(tests/clients/dflash_client.py --lib "$LIB" --steps 3 --layers 4 --bs 4 --q-len 8 --heads 16 --max-prefix 4096 --check)

echo "== eager"
"$KCAP" record -o "$T/eager" -- $PY "${CL[@]}" --mode eager --dump "$T/eager_out"
"$KCAP" check "$T/eager"
$PY tests/e2e/check_dumps.py "$T/eager" "$T/eager_out" --all
"$KCAP" replay "$T/eager" --kernel "$LIB" --ref gpu --json "$T/eager.json"
$PY - "$T/eager.json" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
bitwise = [c for c in cases if c["vs_captured"]["bitwise"]]
print(f"eager replay: {len(bitwise)}/{len(cases)} cases bitwise equal to the captured output")
sys.exit(0 if cases and len(bitwise) == len(cases) else 1)
PY

echo "== graph"
"$KCAP" record -o "$T/graph" -- $PY "${CL[@]}" --mode graph --dump "$T/graph_out"
"$KCAP" check "$T/graph"
n=$(ls "$T"/graph/*.h5 | wc -l)
echo "graph mode: $n snapshots"
$PY tests/e2e/check_dumps.py "$T/graph" "$T/graph_out" --all --graph 12   # 3 steps x 4 layers
"$KCAP" replay "$T/graph" --kernel "$LIB" --ref gpu
