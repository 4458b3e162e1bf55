/*
 * verify_attn.cu — libverify_attn.so: the verify-attention ABI (verify_attn.h) on the GPU,
 * host side. The one translation unit of the library: it includes the kernels and holds what
 * runs on the host per call — argument checks, the fast kernel's plan (vattn_plan.h: variant,
 * row chunks, split count, workspace), the launches and the exported vattn_* entry points.
 *
 * Kernels (each header opens with what it does and why):
 *   vattn_ref.cuh       vattn_ref_kernel: fp32 reference, one block per (token, head)
 *   vattn_fast3.cuh     vattn_fast_kernel (v3): 32 rows per block, for short splits
 *   vattn_fast7.cuh     vattn_fast7_kernel: v7 (64 rows per block) and v8 (its key-split form, 32 rows)
 *   vattn_combine.cuh   vattn_combine_kernel: merges split-K partials in split order
 *   vattn_common.cuh    device helpers shared by all of them
 * The call allocates nothing and never synchronises the host: legal under graph capture.
 * Invalid device data (kv_len < q_len, a bad kv_indptr, a slot outside [0, num_slots); for
 * vattn_extend also qo_indptr[b] != b * q_len or a short / out-of-range mask_indptr) turns that
 * request's outputs into NaN; no out-of-bounds address is ever formed.
 * vattn_verify and vattn_extend differ only in the parameter block they fill (vattn_params):
 * the plan, the kernels and their launches are the same code.
 * Dev build (-DVATTN_DEV, build/tests/libverify_attn_dev.so for the dev harness and tests):
 * VATTN_VARIANT=3|7|8, VATTN_FORCE_NSPLIT=n, VATTN_DEV_DEEP=0|1, VATTN_DEV_WAVES=0|1,
 * VATTN_DEV_PLAN=1 (the plan of each call on stderr) and the timing knobs VATTN_DEV_PDL /
 * VATTN_DEV_STAGE / VATTN_DEV_NOCOMBINE are read per call; the production library reads no
 * environment.
 * Launches go through cudaLaunchKernelEx with programmatic dependent launch (vattn_pdl_wait in
 * vattn_common.cuh); per-call host work is cached where it cannot change (SM count, the fast
 * kernels' shared-memory limit, a usable device).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "vattn_check.h"
#include "vattn_plan.h"
#include "verify_attn.h"

#include "vattn_combine.cuh"
#include "vattn_common.cuh"
#include "vattn_fast3.cuh"
#include "vattn_fast7.cuh"
#include "vattn_ref.cuh"

namespace {

thread_local char g_cuda_err[256];

int vattn_cuda_fail(cudaError_t e, const char *what)
{
    snprintf(g_cuda_err, sizeof g_cuda_err, "%s: %s (%s)", what, cudaGetErrorName(e),
             cudaGetErrorString(e));
    return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? VATTN_ERR_NO_DEVICE
                                                                        : VATTN_ERR_CUDA;
}

/* Dev build knobs read per call (the production library reads none): VATTN_DEV_PDL=0 launches
 * without programmatic dependent launch, VATTN_DEV_STAGE=1|2 and VATTN_DEV_NOCOMBINE=1 are the
 * timing variants of vattn_dev --serving (launch only / no KV tiles / no split combine: their
 * outputs are not the attention); the plan's knobs are read by vattn_plan below. */
int vattn_dev_knob(const char *name, int dflt)
{
#ifdef VATTN_DEV
    const char *v = getenv(name);
    if (v && *v)
        return atoi(v);
#else
    (void)name;
#endif
    return dflt;
}

/* The sizes that decide the plan (vattn_plan.h), read alike from either convention's struct. */
typedef vattn_sizes VattnSizes;

template <class Args> VattnSizes vattn_sizes_of(const Args *a)
{
    return VattnSizes{a->bs, a->q_len, a->num_heads, a->num_slots, a->max_kv_len};
}

/* The fast kernel's plan for these sizes (vattn_plan.h). Workspace and launch both come from
 * vattn_plan, so the split count seen by vattn_workspace_size() is the one the call uses on
 * the same device. */
typedef vattn_fast_plan FastPlan;
static_assert(VATTN_PLAN_BN == BN && VATTN_PLAN_ROWS3 == BM && VATTN_PLAN_ROWS7 == BM7 &&
                  VATTN_PLAN_MAX_SPLITS == COMBINE_MAX_SPLITS && VATTN_PLAN_DV == DV,
              "vattn_plan.h's constants are the kernels'");

/* SMs of the current device, asked once per device (an attribute query per call is host
 * latency on every verify step). Devices past VATTN_SM_CACHE are asked every time. A racing
 * first call per device writes the same value twice: benign. */
constexpr int VATTN_SM_CACHE = 64;
int g_sm_count[VATTN_SM_CACHE];

int vattn_sm_count(void)
{
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        cudaGetLastError(); /* do not leave a sticky-looking error for the caller */
        return 1;
    }
    if (dev >= 0 && dev < VATTN_SM_CACHE && (n = __atomic_load_n(&g_sm_count[dev], __ATOMIC_RELAXED)) > 0)
        return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) {
        cudaGetLastError();
        return 1;
    }
    if (dev >= 0 && dev < VATTN_SM_CACHE)
        __atomic_store_n(&g_sm_count[dev], n, __ATOMIC_RELAXED);
    return n;
}

/* The plan of a call (vattn_plan.h's policy). Dev build only: VATTN_VARIANT=3|7|8,
 * VATTN_FORCE_NSPLIT=n, VATTN_DEV_DEEP=0|1 and VATTN_DEV_WAVES=0|1 force the kernel, the
 * split count, v7's prefetch depth and the multi-wave candidate (read per call). */
FastPlan vattn_plan(const VattnSizes &a, int sms)
{
    const vattn_plan_force force = {vattn_dev_knob("VATTN_VARIANT", 0), vattn_dev_knob("VATTN_FORCE_NSPLIT", 0),
                                    vattn_dev_knob("VATTN_DEV_DEEP", -1), vattn_dev_knob("VATTN_DEV_WAVES", -1)};
    return vattn_plan_for(&a, sms, &force);
}

/* The plan of valid sizes into *pl and its workspace bytes; (size_t)-1 (and *pl zeroed) when
 * they are invalid (both conventions). A call plans once: the argument check and the launch
 * read the same plan. */
size_t vattn_plan_checked(const VattnSizes &a, FastPlan *pl)
{
    memset(pl, 0, sizeof *pl);
    if (a.bs < 1 || a.q_len < 1 || a.q_len > VATTN_MAX_Q_LEN || a.H < 1 || a.H > VATTN_MAX_HEADS ||
        a.num_slots < 1 || a.max_kv_len < 0)
        return (size_t)-1;
    *pl = vattn_plan(a, vattn_sm_count());
    return pl->ws_bytes;
}

size_t vattn_ws_bytes(const VattnSizes &a)
{
    FastPlan pl;
    return vattn_plan_checked(a, &pl);
}

/* The fields both conventions share; the extend-only ones are zero here. */
template <class Args> VattnParams vattn_params_common(const Args *a)
{
    VattnParams p = {};
    p.q = (const uint16_t *)a->q;
    p.q_st = a->q_stride_t;
    p.q_sh = a->q_stride_h;
    p.kv = (const uint16_t *)a->kv_cache;
    p.kv_stride = a->kv_stride;
    p.indptr = a->kv_indptr;
    p.indices = a->kv_indices;
    p.idx64 = a->index_type == VATTN_INDEX_INT64;
    p.o = (uint16_t *)a->o;
    p.o_st = a->o_stride_t;
    p.o_sh = a->o_stride_h;
    p.lse = a->lse;
    p.bs = a->bs;
    p.q_len = a->q_len;
    p.H = a->num_heads;
    p.M = a->q_len * a->num_heads;
    p.num_slots = a->num_slots;
    p.sm_scale = a->sm_scale;
    p.scale_log2 = a->sm_scale * 1.4426950408889634f;
    return p;
}

VattnParams vattn_params(const vattn_args *a)
{
    VattnParams p = vattn_params_common(a);
    p.vis = a->visibility;
    return p;
}

VattnParams vattn_params(const vattn_extend_args *a)
{
    VattnParams p = vattn_params_common(a);
    p.ext = 1;
    p.kext = (const uint16_t *)a->k_extend;
    p.kext_stride = a->k_extend_stride;
    p.qo_indptr = a->qo_indptr;
    p.cmask = a->custom_mask;
    p.mask_indptr = a->mask_indptr;
    return p;
}

/* The fast kernels' dynamic shared memory limit, raised once per (device, kernel): a driver
 * call per verify step is host latency. kern_id indexes the 8 fast-kernel instantiations. */
int g_smem_ok[VATTN_SM_CACHE][8];

cudaError_t vattn_smem_attr(void (*kern)(VattnParams), int kern_id, int bytes, bool force)
{
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess)
        dev = -1;
    const bool cached = dev >= 0 && dev < VATTN_SM_CACHE;
    if (!force && cached && __atomic_load_n(&g_smem_ok[dev][kern_id], __ATOMIC_RELAXED))
        return cudaSuccess;
    const cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess && cached)
        __atomic_store_n(&g_smem_ok[dev][kern_id], 1, __ATOMIC_RELAXED);
    return e;
}

/* One launch, with programmatic dependent launch unless pdl == 0 (vattn_pdl_enter). */
cudaError_t vattn_launch(void (*kern)(VattnParams), dim3 grid, int threads, size_t smem, cudaStream_t st, int pdl,
                         const VattnParams &p)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kern, p);
}

/* A fast kernel: its smem limit (cached), the launch; a failed launch is retried once with the
 * limit set again (a device reset drops it) and without PDL. */
cudaError_t vattn_launch_smem(void (*kern)(VattnParams), int kern_id, int smem, dim3 grid, cudaStream_t st, int pdl,
                              const VattnParams &p)
{
    cudaError_t e = vattn_smem_attr(kern, kern_id, smem, false);
    if (e == cudaSuccess && (e = vattn_launch(kern, grid, NTHREADS, smem, st, pdl, p)) == cudaSuccess)
        return e;
    cudaGetLastError();
    if ((e = vattn_smem_attr(kern, kern_id, smem, true)) != cudaSuccess)
        return e;
    return vattn_launch(kern, grid, NTHREADS, smem, st, 0, p);
}

template <int FP16>
int vattn_launch_fast(const VattnSizes &sz, const FastPlan &pl, VattnParams p, void *ws, cudaStream_t st)
{
    const int sms = vattn_sm_count();
    p.mchunks = pl.mchunks;
    p.nsplit = pl.nsplit;
    p.tiles_per_split = pl.tiles_per_split;
    p.mpad = pl.mpad;
    p.dev_stage = vattn_dev_knob("VATTN_DEV_STAGE", 0);
    /* Programmatic dependent launch for both launches, except when the split grid fills every
     * SM: there it cost 2.2-3.0 us at (1,16,16,4096) (132 blocks, 33 splits of 256 rows; measured
     * in two runs, docs/PERF.md) where it saves 0.2-0.8 us on the serving rows that leave SMs free. */
    const bool full_split_grid = pl.nsplit > 1 && (int64_t)sz.bs * pl.mchunks * pl.nsplit >= sms;
    const int pdl = vattn_dev_knob("VATTN_DEV_PDL", full_split_grid ? 0 : 1);
    if (pl.nsplit > 1) {
        p.ws_o = (float *)ws;
        p.ws_ml = (float2 *)((char *)ws + (size_t)sz.bs * pl.nsplit * pl.mpad * DV * sizeof(float));
    }
    const dim3 grid(pl.mchunks, pl.nsplit, sz.bs);
    if (vattn_dev_knob("VATTN_DEV_PLAN", 0)) /* dev build: which path a test case takes */
        fprintf(stderr, "vattn plan: bs %d M %d v%d%s grid %d x %d x %d (%d tiles per split, %d waves) pdl %d\n",
                sz.bs, p.M, pl.variant, pl.deep ? " deep" : "", pl.mchunks, pl.nsplit, sz.bs, pl.tiles_per_split,
                pl.waves, pdl);
    cudaError_t e;
    if (pl.variant == 7) {
        e = pl.deep
                ? vattn_launch_smem(vattn_fast7_kernel<FP16, 0, 1>, 6 + FP16, (int)sizeof(FastSmem7), grid, st, pdl, p)
                : vattn_launch_smem(vattn_fast7_kernel<FP16, 0>, 2 + FP16, (int)sizeof(FastSmem7), grid, st, pdl, p);
        if (e != cudaSuccess)
            return vattn_cuda_fail(e, "launch vattn_fast7_kernel");
    } else if (pl.variant == 8) {
        e = vattn_launch_smem(vattn_fast7_kernel<FP16, 1>, 4 + FP16, (int)sizeof(FastSmem7), grid, st, pdl, p);
        if (e != cudaSuccess)
            return vattn_cuda_fail(e, "launch vattn_fast7_kernel (key split)");
    } else {
        e = vattn_launch_smem(vattn_fast_kernel<FP16>, FP16, (int)sizeof(FastSmem), grid, st, pdl, p);
        if (e != cudaSuccess)
            return vattn_cuda_fail(e, "launch vattn_fast_kernel");
    }
    if (pl.nsplit > 1 && !vattn_dev_knob("VATTN_DEV_NOCOMBINE", 0)) {
        const bool wide = pl.nsplit >= COMBINE_WIDE_SPLITS;
        e = vattn_launch(wide ? vattn_combine_kernel<FP16, 4> : vattn_combine_kernel<FP16, 1>, dim3(p.M, sz.bs),
                         wide ? 512 : 128, 0, st, pdl, p);
        if (e != cudaSuccess) { /* once more without PDL */
            cudaGetLastError();
            e = vattn_launch(wide ? vattn_combine_kernel<FP16, 4> : vattn_combine_kernel<FP16, 1>, dim3(p.M, sz.bs),
                             wide ? 512 : 128, 0, st, 0, p);
        }
        if (e != cudaSuccess)
            return vattn_cuda_fail(e, "launch vattn_combine_kernel");
    }
    return VATTN_OK;
}

template <int FP16> int vattn_launch_ref(const VattnSizes &sz, const VattnParams &p, cudaStream_t st)
{
    vattn_ref_kernel<FP16><<<dim3(sz.H, sz.bs * sz.q_len), REF_THREADS, 0, st>>>(p);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return vattn_cuda_fail(e, "launch vattn_ref_kernel");
    return VATTN_OK;
}

/* A usable device: asked until the first success, then remembered (a process does not lose
 * its devices; a per-call driver query is host latency). */
int g_device_seen;

int vattn_device_ok(void)
{
    if (__atomic_load_n(&g_device_seen, __ATOMIC_RELAXED))
        return VATTN_OK;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        if (e == cudaSuccess)
            e = cudaErrorNoDevice;
        return vattn_cuda_fail(e, "cudaGetDeviceCount");
    }
    __atomic_store_n(&g_device_seen, 1, __ATOMIC_RELAXED);
    return VATTN_OK;
}

/* The argument check of each convention (vattn_check.c), against the call's plan's workspace. */
int vattn_check(const vattn_args *a, void *ws, size_t wsb, size_t need)
{
    return vattn_check_args_ws(a, ws, wsb, 1, need);
}

int vattn_check(const vattn_extend_args *a, void *ws, size_t wsb, size_t need)
{
    return vattn_check_extend_args_ws(a, ws, wsb, 1, need);
}

/* Every entry point of either convention: the argument check, the device check, then the
 * fast kernels (fast = 1) or the reference kernel, on the same parameter block. */
#ifdef VATTN_PERTURB
/* build/tests/libverify_attn_perturbed.so (shadow mode's GPU tests): the production kernels,
 * then ONE output element changed as in the CPU library's perturbed build (verify_attn_cpu.c):
 * o[token (bs-1)*q_len][head H-1][channel 77] += 0.5 in fp32, rounded back. */
template <int FP16> __global__ void vattn_perturb_kernel(VattnParams p)
{
    uint16_t *e = p.o + (int64_t)(p.bs - 1) * p.q_len * p.o_st + (int64_t)(p.H - 1) * p.o_sh + 77;
    float v = FP16 ? __half2float(__ushort_as_half(*e)) : __uint_as_float((uint32_t)*e << 16);
    v += 0.5f;
    *e = FP16 ? __half_as_ushort(__float2half_rn(v)) : __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
#endif

template <class Args> int vattn_run(const Args *a, void *ws, size_t wsb, void *stream, int fast)
{
    g_cuda_err[0] = 0;
    FastPlan pl;
    const VattnSizes sz = a ? vattn_sizes_of(a) : VattnSizes{};
    const size_t need = a ? vattn_plan_checked(sz, &pl) : (size_t)-1;
    int rc = vattn_check(a, ws, wsb, need);
    if (rc || (rc = vattn_device_ok()))
        return rc;
    const VattnParams p = vattn_params(a);
    cudaStream_t st = (cudaStream_t)stream;
    const int fp16 = a->dtype == VATTN_DTYPE_FP16;
#ifdef VATTN_PERTURB
    if (fast &&
        (rc = fp16 ? vattn_launch_fast<1>(sz, pl, p, ws, st) : vattn_launch_fast<0>(sz, pl, p, ws, st)) == VATTN_OK) {
        if (fp16)
            vattn_perturb_kernel<1><<<1, 1, 0, st>>>(p);
        else
            vattn_perturb_kernel<0><<<1, 1, 0, st>>>(p);
        cudaError_t e = cudaGetLastError();
        return e == cudaSuccess ? VATTN_OK : vattn_cuda_fail(e, "launch vattn_perturb_kernel");
    }
    if (fast)
        return rc;
#else
    if (fast)
        return fp16 ? vattn_launch_fast<1>(sz, pl, p, ws, st) : vattn_launch_fast<0>(sz, pl, p, ws, st);
#endif
    return fp16 ? vattn_launch_ref<1>(sz, p, st) : vattn_launch_ref<0>(sz, p, st);
}

} /* namespace */

static_assert(sizeof(FastSmem) <= 99 * 1024, "sm_120 allows at most 99 KB of shared memory per block");
static_assert(sizeof(FastSmem7) <= 99 * 1024, "sm_120 allows at most 99 KB of shared memory per block");

extern "C" {

VATTN_API int vattn_abi_version(void) { return VATTN_ABI_VERSION; }

VATTN_API const char *vattn_backend(void) { return "cuda"; }

VATTN_API const char *vattn_status_string(int status) { return vattn_status_message(status); }

VATTN_API const char *vattn_last_cuda_error(void) { return g_cuda_err; }

VATTN_API size_t vattn_workspace_size(const vattn_args *a)
{
    return a ? vattn_ws_bytes(vattn_sizes_of(a)) : (size_t)-1;
}

VATTN_API size_t vattn_extend_workspace_size(const vattn_extend_args *a)
{
    return a ? vattn_ws_bytes(vattn_sizes_of(a)) : (size_t)-1;
}

VATTN_API int vattn_verify(const vattn_args *a, void *workspace, size_t workspace_bytes,
                           void *stream)
{
    return vattn_run(a, workspace, workspace_bytes, stream, 1);
}

VATTN_API int vattn_verify_reference(const vattn_args *a, void *workspace,
                                     size_t workspace_bytes, void *stream)
{
    return vattn_run(a, workspace, workspace_bytes, stream, 0);
}

VATTN_API int vattn_extend(const vattn_extend_args *a, void *workspace, size_t workspace_bytes,
                           void *stream)
{
    return vattn_run(a, workspace, workspace_bytes, stream, 1);
}

VATTN_API int vattn_extend_reference(const vattn_extend_args *a, void *workspace,
                                     size_t workspace_bytes, void *stream)
{
    return vattn_run(a, workspace, workspace_bytes, stream, 0);
}

} /* extern "C" */
