/*
 * kcap_cu.h — the CUDA driver API, loaded at run time with dlopen("libcuda.so.1").
 *
 * kcap must run on machines without a GPU or a CUDA driver (CI, a laptop replaying on the
 * CPU library), and the interposer must never drag a second CUDA runtime into a host process
 * that has its own. So kcap links no CUDA library: capture and replay reach the driver through
 * this table of function pointers, which stays empty (kcap_cu_load() fails cleanly) when no
 * driver is installed. Driver objects (contexts, streams, device pointers) are shared with
 * whatever runtime the host process uses, so the host's cudaStream_t is a CUstream here.
 */
#ifndef KCAP_CU_H
#define KCAP_CU_H

#include <cuda.h> /* types and enums only; no libcuda link */

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, symbol-to-dlsym, return, params) */
#define KCAP_CU_FUNCS(X)                                                                   \
    X(cuInit, "cuInit", CUresult, (unsigned int))                                         \
    X(cuDriverGetVersion, "cuDriverGetVersion", CUresult, (int *))                        \
    X(cuDeviceGetCount, "cuDeviceGetCount", CUresult, (int *))                            \
    X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice *, int))                            \
    X(cuDeviceGetName, "cuDeviceGetName", CUresult, (char *, int, CUdevice))              \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult,                             \
      (int *, CUdevice_attribute, CUdevice))                                              \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult,                     \
      (CUcontext *, CUdevice))                                                            \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", CUresult, (CUcontext *))                        \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult, (CUcontext))                          \
    X(cuCtxGetDevice, "cuCtxGetDevice", CUresult, (CUdevice *))                           \
    X(cuCtxSynchronize, "cuCtxSynchronize", CUresult, (void))                             \
    X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr *, size_t))                     \
    X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr))                                 \
    X(cuMemHostAlloc, "cuMemHostAlloc", CUresult, (void **, size_t, unsigned int))        \
    X(cuMemFreeHost, "cuMemFreeHost", CUresult, (void *))                                 \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", CUresult, (CUdeviceptr, const void *, size_t))     \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", CUresult, (void *, CUdeviceptr, size_t))           \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", CUresult,                                \
      (CUdeviceptr, const void *, size_t, CUstream))                                      \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult,                                \
      (void *, CUdeviceptr, size_t, CUstream))                                            \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", CUresult,                                \
      (CUdeviceptr, CUdeviceptr, size_t, CUstream))                                       \
    X(cuMemsetD8, "cuMemsetD8_v2", CUresult, (CUdeviceptr, unsigned char, size_t))        \
    X(cuMemsetD8Async, "cuMemsetD8Async", CUresult,                                       \
      (CUdeviceptr, unsigned char, size_t, CUstream))                                     \
    X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult, (size_t *, size_t *))                    \
    X(cuPointerGetAttribute, "cuPointerGetAttribute", CUresult,                           \
      (void *, CUpointer_attribute, CUdeviceptr))                                         \
    X(cuStreamCreate, "cuStreamCreate", CUresult, (CUstream *, unsigned int))             \
    X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream))                        \
    X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream))                   \
    X(cuStreamQuery, "cuStreamQuery", CUresult, (CUstream))                               \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", CUresult, (CUstream, CUevent, unsigned int)) \
    X(cuStreamIsCapturing, "cuStreamIsCapturing", CUresult,                               \
      (CUstream, CUstreamCaptureStatus *))                                                \
    X(cuStreamGetCtx, "cuStreamGetCtx", CUresult, (CUstream, CUcontext *))                \
    X(cuEventCreate, "cuEventCreate", CUresult, (CUevent *, unsigned int))                \
    X(cuEventDestroy, "cuEventDestroy_v2", CUresult, (CUevent))                           \
    X(cuEventRecord, "cuEventRecord", CUresult, (CUevent, CUstream))                      \
    X(cuEventQuery, "cuEventQuery", CUresult, (CUevent))                                  \
    X(cuEventSynchronize, "cuEventSynchronize", CUresult, (CUevent))                      \
    X(cuEventElapsedTime, "cuEventElapsedTime", CUresult, (float *, CUevent, CUevent))    \
    X(cuModuleLoadData, "cuModuleLoadData", CUresult, (CUmodule *, const void *))         \
    X(cuModuleUnload, "cuModuleUnload", CUresult, (CUmodule))                             \
    X(cuModuleGetFunction, "cuModuleGetFunction", CUresult,                               \
      (CUfunction *, CUmodule, const char *))                                             \
    X(cuLaunchKernel, "cuLaunchKernel", CUresult,                                         \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,  \
       CUstream, void **, void **))                                                       \
    X(cuLaunchHostFunc, "cuLaunchHostFunc", CUresult, (CUstream, CUhostFn, void *))       \
    X(cuGetErrorString, "cuGetErrorString", CUresult, (CUresult, const char **))          \
    /* (added by capture) lets libkcap allocate while the host's stream is capturing */   \
    X(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", CUresult,   \
      (CUstreamCaptureMode *))

/* Optional entry points: NULL when the driver lacks one, and only the feature that uses it
 * is off (kcap_cu_load never fails for them). The clean graph twins of capture/
 * kcap_graphexec.c. Where the driver renamed a call (_v2 with edge data, CUDA 12.3), both are
 * listed and the newer is preferred; struct parameters are void * (any header version). */
#define KCAP_CU_OPT_FUNCS(X)                                                               \
    X(cuGraphGetNodes, "cuGraphGetNodes", CUresult, (CUgraph, CUgraphNode *, size_t *))   \
    X(cuGraphNodeGetType, "cuGraphNodeGetType", CUresult, (CUgraphNode, CUgraphNodeType *)) \
    X(cuGraphKernelNodeGetParams_v2, "cuGraphKernelNodeGetParams_v2", CUresult,           \
      (CUgraphNode, void *))                                                              \
    X(cuGraphKernelNodeGetParams_v1, "cuGraphKernelNodeGetParams", CUresult,              \
      (CUgraphNode, void *))                                                              \
    X(cuGraphNodeGetDependencies_v2, "cuGraphNodeGetDependencies_v2", CUresult,           \
      (CUgraphNode, CUgraphNode *, void *, size_t *))                                     \
    X(cuGraphNodeGetDependencies_v1, "cuGraphNodeGetDependencies", CUresult,              \
      (CUgraphNode, CUgraphNode *, size_t *))                                             \
    X(cuGraphNodeGetDependentNodes_v2, "cuGraphNodeGetDependentNodes_v2", CUresult,       \
      (CUgraphNode, CUgraphNode *, void *, size_t *))                                     \
    X(cuGraphNodeGetDependentNodes_v1, "cuGraphNodeGetDependentNodes", CUresult,          \
      (CUgraphNode, CUgraphNode *, size_t *))                                             \
    X(cuGraphAddDependencies_v2, "cuGraphAddDependencies_v2", CUresult,                   \
      (CUgraph, const CUgraphNode *, const CUgraphNode *, const void *, size_t))          \
    X(cuGraphAddDependencies_v1, "cuGraphAddDependencies", CUresult,                      \
      (CUgraph, const CUgraphNode *, const CUgraphNode *, size_t))                        \
    X(cuGraphAddEmptyNode, "cuGraphAddEmptyNode", CUresult,                               \
      (CUgraphNode *, CUgraph, const CUgraphNode *, size_t))                              \
    X(cuGraphDestroyNode, "cuGraphDestroyNode", CUresult, (CUgraphNode))                  \
    X(cuGraphClone, "cuGraphClone", CUresult, (CUgraph *, CUgraph))                       \
    X(cuGraphDestroy, "cuGraphDestroy", CUresult, (CUgraph))                              \
    X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", CUresult,               \
      (CUgraphExec *, CUgraph, unsigned long long))                                       \
    X(cuGraphExecGetFlags, "cuGraphExecGetFlags", CUresult, (CUgraphExec, cuuint64_t *))  \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", CUresult, (CUgraphExec))                \
    /* shadow mode inside CUDA graphs (capture/kcap_gpu_shadow_graph.c): the capture id */ \
    X(cuStreamGetCaptureInfo_v3, "cuStreamGetCaptureInfo_v3", CUresult,                   \
      (CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *, const CUgraphNode **,  \
       const void **, size_t *))                                                          \
    X(cuStreamGetCaptureInfo_v2, "cuStreamGetCaptureInfo_v2", CUresult,                   \
      (CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *, const CUgraphNode **,  \
       size_t *))                                                                         \
    /* ... and the candidate's trial capture on kcap's own stream */                       \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", CUresult, (CUstream, CUstreamCaptureMode)) \
    X(cuStreamEndCapture, "cuStreamEndCapture", CUresult, (CUstream, CUgraph *))          \
    /* shadow mode's worker thread (capture/kcap_gpu_shadow_async.c): the service's stream  \
       waits for a word the side stream writes */                                          \
    X(cuStreamWaitValue32, "cuStreamWaitValue32_v2", CUresult,                            \
      (CUstream, CUdeviceptr, cuuint32_t, unsigned int))                                  \
    X(cuStreamWriteValue32, "cuStreamWriteValue32_v2", CUresult,                          \
      (CUstream, CUdeviceptr, cuuint32_t, unsigned int))                                  \
    X(cuModuleGetLoadingMode, "cuModuleGetLoadingMode", CUresult, (CUmoduleLoadingMode *))

typedef struct kcap_cu {
#define KCAP_CU_MEMBER(name, sym, ret, params) ret(CUDAAPI *name) params;
    KCAP_CU_FUNCS(KCAP_CU_MEMBER)
    KCAP_CU_OPT_FUNCS(KCAP_CU_MEMBER)
#undef KCAP_CU_MEMBER
    void *handle;
} kcap_cu;

/*
 * Load libcuda.so.1 (once, thread-safe) and cuInit(0). Returns the table, or NULL with a
 * reason in *why (static string) when there is no driver or no device. Never aborts.

 */
const kcap_cu *kcap_cu_load(const char **why);

/* "CUDA_ERROR_x: message" for a result, via cuGetErrorString when available. */
const char *kcap_cu_errstr(const kcap_cu *cu, CUresult r);

#ifdef __cplusplus
}
#endif

#endif
