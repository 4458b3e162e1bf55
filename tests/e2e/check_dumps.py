"""check_dumps.py — do the snapshots hold exactly the outputs the client got?

Usage: check_dumps.py SNAPSHOT_DIR DUMP_DIR [--all] [--graph N]
Each snapshot's outputs o and lse (read with kcap.load, i.e. validated like `kcap check`; o as
its raw bf16/f16 bits) must equal, byte for byte, one of the client's dumps
(tests/clients/dflash_client.py --dump: o bytes then lse bytes per call). With --all, every
dump must also be matched by some snapshot (nothing was lost). With --graph N, exactly N
snapshots must come from calls made inside CUDA stream capture (taken at graph replays), and
those must match too.
"""
import glob
import hashlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import kcap  # noqa: E402


def main():
    snap_dir, dump_dir = sys.argv[1], sys.argv[2]
    want_all = "--all" in sys.argv
    dumps = {}
    for p in sorted(glob.glob(os.path.join(dump_dir, "*.bin"))):
        with open(p, "rb") as f:
            dumps.setdefault(hashlib.sha256(f.read()).hexdigest(), p)
    graph_want = int(sys.argv[sys.argv.index("--graph") + 1]) if "--graph" in sys.argv else None
    seen, bad, n, graph_n = set(), 0, 0, 0
    for p in sorted(glob.glob(os.path.join(snap_dir, "*.h5"))):
        s = kcap.load(p)
        o, lse = s.raw("o", "out").tobytes(), s.raw("lse", "out").tobytes()
        graph_n += int(s.meta["in_stream_capture"])
        h = hashlib.sha256(o + lse).hexdigest()
        n += 1
        if h in dumps:
            seen.add(h)
        else:
            bad += 1
            print(f"check_dumps: {os.path.basename(p)}: outputs match no client call")
    missing = len(dumps) - len(seen) if want_all else 0
    print(f"check_dumps: {n} snapshots, {n - bad} match a client call, "
          f"{len(dumps)} client calls, {missing} not captured" if want_all else
          f"check_dumps: {n} snapshots, {n - bad} match a client call")
    if graph_want is not None:
        print(f"check_dumps: {graph_n} snapshots taken at CUDA graph replays (want {graph_want})")
        if graph_n != graph_want:
            return 1
    return 1 if bad or missing or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
