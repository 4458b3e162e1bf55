#!/usr/bin/env bash
# test_torch_client_gpu.sh — the torch + ctypes client (the way SGLang calls the kernel) on the
# GPU under `kcap record`, eager and CUDA-graph modes:
#  - the client's own checks pass (float64 reference; graph replays == eager calls bitwise);
#  - every snapshot validates, holds exactly the outputs the client got (read through h5py +
#    the filter plugin), and eager snapshots replay bitwise equal on the same CUDA build;
#  - graph mode: calls made inside CUDA graph capture are recorded at graph replays.
. "$(dirname "$0")/../lib.sh"
# every step must succeed: the first failing command ends the test with its status
set -eo pipefail
need_torch_gpu
export HDF5_PLUGIN_PATH=$ROOT/$B/plugins
CL=(tests/clients/dflash_client.py --lib "$CUDALIB" --steps 3 --layers 4 --bs 4 --q-len 8 --heads 16 --max-prefix 4096 --check)

echo "== eager"
"$KCAP" record -o "$T/eager" -- $GPY "${CL[@]}" --mode eager --dump "$T/eager_out"
"$KCAP" check "$T/eager"
$GPY tests/e2e/check_dumps.py "$T/eager" "$T/eager_out" --all
"$KCAP" replay "$T/eager" --kernel "$CUDALIB" --ref gpu --json "$T/eager.json"
$GPY - "$T/eager.json" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
bitwise = [c for c in cases if c["vs_captured"]["bitwise"]]
print(f"eager replay: {len(bitwise)}/{len(cases)} cases bitwise equal to the captured output")
sys.exit(0 if cases and len(bitwise) == len(cases) else 1)
PY

echo "== graph"
"$KCAP" record -o "$T/graph" -- $GPY "${CL[@]}" --mode graph --dump "$T/graph_out"
"$KCAP" check "$T/graph"
n=$(ls "$T"/graph/*.h5 | wc -l)
echo "graph mode: $n snapshots"
$GPY tests/e2e/check_dumps.py "$T/graph" "$T/graph_out" --all --graph 12   # 3 steps x 4 layers
"$KCAP" replay "$T/graph" --kernel "$CUDALIB" --ref gpu
