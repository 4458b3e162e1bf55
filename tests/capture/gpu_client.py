#!/usr/bin/env python3
"""gpu_client.py — torch + ctypes client of libverify_attn.so (CUDA) for capture's GPU tests
and benchmarks, the way SGLang-side code calls the kernel: ctypes.CDLL + torch tensors.

Modes:
  eager  N calls on a side torch stream, each on its own random tensors; dumps each call's
         inputs and outputs (layout of capture_client.c, read by snapcmp).
  graph  one call captured in a CUDA graph on static tensors, replayed N times with new
         random inputs copied in before each replay; dumps each replay (graph 1 in .meta).
  burst  graph replayed N times back to back on identical inputs, one dump (drop tests).
  arm    dormant process: graph captured while dormant, then `kcap arm PID --count K`
         on ourselves, then N replays with dumps.
  long   the long-context check: N eager calls back to back (not synchronised: the staging
         ring must hold them all), then one call captured in a CUDA graph and replayed R times
         with new inputs; dumps every call and replay. Use with --shape.
  mixed  dormant, one graph captured, armed for --count, then N eager calls and N replays
         interleaved: exactly --count snapshots in all (one budget for both paths);
         --no-replay: the graph is never replayed, only eager calls come (10 ms apart).
  sites  a dormant process captures --graphs graphs of --layers calls each, largest batch
         first (as SGLang does), then arms itself (`kcap arm --count K`) and replays the
         last-captured, smallest graph N times; dumps each replay.
  fault  N good eager calls, then one whose q points at unmapped device memory: the CUDA
         context fails (illegal address); the process must end as it does bare (exit 3 after
         the CUDA error), never hang or die by a signal under libkcap.
  bench  timings (see bench_capture_gpu.sh); prints one JSON line.
  loop   eager calls on new random tensors every 20 ms until the file --until exists (a live
         service for `kcap shadow PID`); exit 1 if any call failed.

--shape BS,H,QLEN,PREFIX sets the call's geometry (prefix = longest request's prefix).
"""
import argparse
import ctypes as C
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from kcap.vattn import VattnArgs  # noqa: E402  (the one binding of the ABI)


def rand_bf16(g, n):
    x = torch.rand(n, generator=g, device="cuda") * 4 - 2
    x[x == 0] = 1.0
    return x.to(torch.bfloat16)


class Call:
    """One call's tensors (device) and its args struct."""

    def __init__(self, g, bs, q_len, H, prefix, extra_slots, vis=True, exact=False):
        T = bs * q_len
        if exact:  # every request at the full prefix (the sizes of the shape tables)
            lens = torch.full((bs,), q_len + prefix, dtype=torch.int64, device="cuda")
        else:
            lens = q_len + torch.randint(prefix // 2, prefix + 1, (bs,), generator=g, device="cuda")
        self.indptr = torch.zeros(bs + 1, dtype=torch.int32, device="cuda")
        self.indptr[1:] = torch.cumsum(lens, 0).to(torch.int32)
        nnz = int(self.indptr[-1])
        self.num_slots = nnz + extra_slots
        self.kv_stride = 576
        self.pool = rand_bf16(g, self.num_slots * 576)
        self.indices = torch.randperm(self.num_slots, generator=g, device="cuda")[:nnz].to(torch.int64)
        self.qsh, self.qst = 576 + 8, H * (576 + 8) + 8  # strided q
        self.q = rand_bf16(g, T * self.qst)
        self.vis = torch.randint(0, 2, (bs * q_len * q_len,), generator=g, device="cuda",
                                 dtype=torch.uint8) if vis else None
        self.osh, self.ost = 512, H * 512
        self.o = torch.full((T * self.ost,), float("nan"), dtype=torch.bfloat16, device="cuda")
        self.lse = torch.full((T * H,), float("nan"), dtype=torch.float32, device="cuda")
        self.bs, self.q_len, self.H, self.T, self.nnz = bs, q_len, H, T, nnz
        self.args = VattnArgs(struct_size=C.sizeof(VattnArgs), dtype=0, index_type=1, bs=bs,
                              q_len=q_len, num_heads=H, num_slots=self.num_slots,
                              max_kv_len=int(lens.max()), sm_scale=0.0625, reserved0=0,
                              q=self.q.data_ptr(), q_stride_t=self.qst, q_stride_h=self.qsh,
                              kv_cache=self.pool.data_ptr(), kv_stride=576,
                              kv_indptr=self.indptr.data_ptr(), kv_indices=self.indices.data_ptr(),
                              visibility=self.vis.data_ptr() if vis else None,
                              o=self.o.data_ptr(), o_stride_t=self.ost, o_stride_h=self.osh,
                              lse=self.lse.data_ptr())

    def refill(self, g):
        """New random q / pool / visibility in place (same addresses: graph replays)."""
        self.q.copy_(rand_bf16(g, self.q.numel()))
        self.pool.copy_(rand_bf16(g, self.pool.numel()))
        if self.vis is not None:
            self.vis.copy_(torch.randint(0, 2, self.vis.shape, generator=g, device="cuda",
                                         dtype=torch.uint8))

    def captured_bytes(self):
        return (self.T * self.H * (576 + 512) * 2 + self.nnz * (576 * 2 + 8) + 4 * (self.bs + 1)
                + self.T * self.H * 4 + (self.vis.numel() if self.vis is not None else 0))

    def dump(self, d, tag, status, graph):
        def raw(t):
            return t.detach().cpu().contiguous().view(torch.uint8).numpy()
        T, H = self.T, self.H
        q = self.q.view(torch.int16).cpu().numpy()
        qd = np.stack([q[t * self.qst + h * self.qsh: t * self.qst + h * self.qsh + 576]
                       for t in range(T) for h in range(H)])
        o = self.o.view(torch.int16).cpu().numpy()
        od = np.stack([o[t * self.ost + h * self.osh: t * self.ost + h * self.osh + 512]
                       for t in range(T) for h in range(H)])
        p = os.path.join(d, tag)
        with open(p + ".meta", "w") as f:
            f.write(f"status {status}\nbs {self.bs}\nq_len {self.q_len}\nheads {H}\n"
                    f"num_slots {self.num_slots}\nkv_stride 576\nindex_size 8\n"
                    f"vis {int(self.vis is not None)}\nnnz {self.nnz}\ngraph {int(graph)}\n")
        qd.tofile(p + ".q")
        raw(self.pool).tofile(p + ".pool")
        raw(self.indptr).tofile(p + ".indptr")
        raw(self.indices).tofile(p + ".indices")
        if self.vis is not None:
            raw(self.vis).tofile(p + ".vis")
        od.tofile(p + ".o")
        raw(self.o).tofile(p + ".ofull")
        raw(self.lse).tofile(p + ".lse")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--mode", default="eager")
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dump")
    ap.add_argument("--kcap")
    ap.add_argument("--count", type=int, default=2)
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--shape", help="BS,H,QLEN,PREFIX")
    ap.add_argument("--replays", type=int, default=3)
    ap.add_argument("--graphs", type=int, default=28)
    ap.add_argument("--layers", type=int, default=150)
    ap.add_argument("--gap", type=float, default=0.03, help="bench: seconds between timed reps")
    ap.add_argument("--burst", type=float, default=1.0, help="bench: seconds of back-to-back replays")
    ap.add_argument("--no-replay", action="store_true", help="mixed: never replay the graph")
    ap.add_argument("--until", help="loop: stop once this file exists")
    a = ap.parse_args()
    lib = C.CDLL(a.lib)
    fn = lib.vattn_verify
    fn.restype = C.c_int
    fn.argtypes = [C.POINTER(VattnArgs), C.c_void_p, C.c_size_t, C.c_void_p]
    wsf = lib.vattn_workspace_size
    wsf.restype = C.c_size_t
    wsf.argtypes = [C.POINTER(VattnArgs)]
    g = torch.Generator(device="cuda")
    g.manual_seed(a.seed)
    stream = torch.cuda.Stream()
    shape = (8, 8, 16, 4096, 4096) if a.big else (2, 4, 4, 300, 1000)
    if a.shape:
        bs, H, q_len, prefix = (int(x) for x in a.shape.split(","))
        shape = (bs, q_len, H, prefix, 4096, True, True)  # exact lengths

    def call(c, ws, s):
        return fn(C.byref(c.args), ws.data_ptr() if ws is not None else None,
                  ws.numel() if ws is not None else 0, C.c_void_p(s.cuda_stream))

    def workspace(c):
        n = wsf(C.byref(c.args))
        return torch.empty(max(n, 16), dtype=torch.uint8, device="cuda") if n else None

    bad = 0
    if a.mode == "loop":
        n = 0
        while not os.path.exists(a.until):
            with torch.cuda.stream(stream):
                c = Call(g, *shape)
                ws = workspace(c)
                bad += call(c, ws, stream) != 0
            stream.synchronize()
            n += 1
            time.sleep(0.02)
        print(f"loop: {n} calls, {bad} failed")
    elif a.mode == "eager":
        calls = []
        with torch.cuda.stream(stream):
            for i in range(a.n):
                c = Call(g, *shape)
                ws = workspace(c)
                st = call(c, ws, stream)
                calls.append((c, st, ws))
        torch.cuda.synchronize()
        for i, (c, st, _) in enumerate(calls):
            bad += st != 0
            if a.dump:
                c.dump(a.dump, f"e{a.seed}-c{i}", st, False)
    elif a.mode == "long":
        cg = Call(g, *shape)
        ws = workspace(cg)
        calls = [(cg, ws)] + [(Call(g, *shape), None) for _ in range(a.n - 1)]
        calls = [(c, w if w is not None else workspace(c)) for c, w in calls]
        torch.cuda.synchronize()
        sts = []
        with torch.cuda.stream(stream):  # back to back: the ring holds them all at once
            for c, w in calls:
                sts.append(call(c, w, stream))
        torch.cuda.synchronize()
        for i, ((c, _), st) in enumerate(zip(calls, sts)):
            bad += st != 0
            if a.dump:
                c.dump(a.dump, f"e{a.seed}-c{i}", st, False)
        graph = torch.cuda.CUDAGraph()
        status = []
        with torch.cuda.graph(graph, stream=stream):
            status.append(call(cg, ws, stream))
        bad += status[0] != 0
        for i in range(a.replays):
            cg.refill(g)
            cg.o.fill_(float("nan"))
            cg.lse.fill_(float("nan"))
            torch.cuda.synchronize()
            graph.replay()
            torch.cuda.synchronize()
            if a.dump:
                cg.dump(a.dump, f"g{a.seed}-r{i}", status[0], True)
    elif a.mode == "fault":
        cs = [Call(g, *shape) for _ in range(a.n)]
        with torch.cuda.stream(stream):
            for c in cs:
                bad += call(c, workspace(c), stream) != 0
        torch.cuda.synchronize()
        c = Call(g, *shape)
        ws = workspace(c)
        c.args.q = 0x7f0000000000  # no such device memory: the kernel faults
        try:
            with torch.cuda.stream(stream):
                call(c, ws, stream)
            torch.cuda.synchronize()
            print("fault: no CUDA error raised", file=sys.stderr)
            return 1
        except RuntimeError as e:
            print("fault: CUDA error as expected:", str(e).splitlines()[0], file=sys.stderr)
            return 3 if not bad else 1
    elif a.mode == "mixed":
        # dormant; a graph captured; armed for --count; then eager calls and graph replays
        # interleaved, never synchronised: the two paths share one budget
        c = Call(g, *shape)
        ws = workspace(c)
        with torch.cuda.stream(stream):
            call(c, ws, stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            call(c, ws, stream)
        r = subprocess.run([a.kcap, "arm", str(os.getpid()), "--count", str(a.count)],
                           capture_output=True, text=True)
        print(r.stdout.strip(), r.stderr.strip(), file=sys.stderr)
        time.sleep(0.3)
        with torch.cuda.stream(stream):
            for i in range(a.n):
                bad += call(c, ws, stream) != 0
                if a.no_replay:
                    time.sleep(0.01)  # eager traffic only, for a while: the graph sits idle
                else:
                    graph.replay()
        torch.cuda.synchronize()
        time.sleep(0.5)
    elif a.mode == "sites":
        # SGLang's order: largest batch first; every layer's call in a graph is identical
        graphs = []
        for k in range(a.graphs, 0, -1):
            c = Call(g, k, 2, 4, 64, 64)
            ws = workspace(c)
            with torch.cuda.stream(stream):
                call(c, ws, stream)
            torch.cuda.synchronize()
            gr = torch.cuda.CUDAGraph()
            sts = []
            with torch.cuda.graph(gr, stream=stream):
                for _ in range(a.layers):
                    sts.append(call(c, ws, stream))
            bad += sum(st != 0 for st in sts)
            graphs.append((c, gr, sts[0]))
        r = subprocess.run([a.kcap, "arm", str(os.getpid()), "--count", str(a.count)],
                           capture_output=True, text=True)
        print(r.stdout.strip(), r.stderr.strip(), file=sys.stderr)
        time.sleep(0.3)  # the drainer pushes the new budget to the device
        c, gr, st = graphs[-1]  # the last captured, smallest graph
        for i in range(a.n):
            c.refill(g)
            c.o.fill_(float("nan"))
            c.lse.fill_(float("nan"))
            torch.cuda.synchronize()
            gr.replay()
            torch.cuda.synchronize()
            if a.dump:
                c.dump(a.dump, f"s{a.seed}-r{i}", st, True)
            time.sleep(0.05)
        print(f"sites: {a.graphs} graphs x {a.layers} calls = {a.graphs * a.layers} graph call "
              f"sites; replayed the bs={c.bs} graph {a.n} times", file=sys.stderr)
    elif a.mode in ("graph", "burst", "arm"):
        c = Call(g, *shape)
        ws = workspace(c)
        # warm up (the kernel library's first launch may load modules)
        with torch.cuda.stream(stream):
            st0 = call(c, ws, stream)
        torch.cuda.synchronize()
        if a.dump and a.mode in ("graph", "burst"):  # the eager warm-up is captured too
            c.dump(a.dump, f"w{a.seed}", st0, False)
        graph = torch.cuda.CUDAGraph()
        status = []
        with torch.cuda.graph(graph, stream=stream):
            status.append(call(c, ws, stream))
        bad += status[0] != 0
        if a.mode == "arm":
            time.sleep(0.3)
            r = subprocess.run([a.kcap, "arm", str(os.getpid()), "--count", str(a.count)],
                               capture_output=True, text=True)
            print(r.stdout.strip(), r.stderr.strip(), file=sys.stderr)
            time.sleep(0.3)  # the drainer pushes the new budget to the device
        if a.mode == "burst":
            for _ in range(a.n):
                graph.replay()
            torch.cuda.synchronize()
            if a.dump:
                c.dump(a.dump, f"b{a.seed}", status[0], True)
        else:
            for i in range(a.n):
                c.refill(g)
                c.o.fill_(float("nan"))
                c.lse.fill_(float("nan"))
                torch.cuda.synchronize()
                graph.replay()
                torch.cuda.synchronize()
                if a.dump:
                    c.dump(a.dump, f"g{a.seed}-r{i}", status[0], True)
                time.sleep(0.02)  # let the drainer take it (the ring would also absorb it)
    elif a.mode == "bench":
        c = Call(g, *shape)
        ws = workspace(c)
        free0 = torch.cuda.mem_get_info()[0]  # before the first call: the ring is allocated then
        with torch.cuda.stream(stream):
            call(c, ws, stream)
        torch.cuda.synchronize()
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def timed(f, reps):
            ts = []
            for _ in range(reps):
                torch.cuda.synchronize()
                with torch.cuda.stream(stream):
                    ev0.record(stream)
                    f()
                    ev1.record(stream)
                ev1.synchronize()
                ts.append(ev0.elapsed_time(ev1) * 1000.0)
                time.sleep(a.gap)  # let the drainer keep up: we time the stream, not drops
            ts.sort()
            return ts[len(ts) // 2]
        host = []

        def eager_host():
            t = time.perf_counter()
            call(c, ws, stream)
            host.append((time.perf_counter() - t) * 1e6)
        eager_us = timed(eager_host, a.n)
        host.sort()
        host_us = host[len(host) // 2]
        kcap_dev_bytes = free0 - torch.cuda.mem_get_info()[0]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            call(c, ws, stream)
        ghost = []

        def graph_host():
            t = time.perf_counter()
            graph.replay()
            ghost.append((time.perf_counter() - t) * 1e6)
        graph_us = timed(graph_host, a.n)
        ghost.sort()
        nb = c.captured_bytes()
        src = torch.empty(nb, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        copy_us = timed(lambda: dst.copy_(src), a.n)
        # sustained rate: replays back to back for ~1 s
        torch.cuda.synchronize()
        t0 = time.time()
        k = 0
        while time.time() - t0 < a.burst:
            graph.replay()
            k += 1
        torch.cuda.synchronize()
        dt = time.time() - t0
        # under capture: how fast snapshots reach the disk (files in KCAP_DIR stop growing)
        kdir, files, t_last = os.environ.get("KCAP_DIR"), 0, t0
        if kdir and os.environ.get("LD_PRELOAD"):
            quiet = 0
            while quiet < 20 and time.time() - t0 < 120:
                n = len([f for f in os.listdir(kdir) if f.endswith(".h5")]) if os.path.isdir(kdir) else 0
                if n != files:
                    files, t_last, quiet = n, time.time(), 0
                else:
                    quiet += 1
                time.sleep(0.1)
        print(json.dumps({"files_after_burst": files, "burst_to_last_file_s": t_last - t0,"eager_us": eager_us, "graph_us": graph_us, "d2d_copy_us": copy_us,
                          "eager_host_us": host_us, "graph_host_us": ghost[len(ghost) // 2],
                          "device_bytes_taken_after_first_call": kcap_dev_bytes,
                          "captured_bytes": nb, "burst_replays": k, "burst_s": dt,
                          "shape": shape}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
