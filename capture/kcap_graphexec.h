/*
 * kcap_graphexec.h — kcap_graphexec.c: the clean twin of an executable CUDA graph that holds
 * libkcap's staging nodes (the same graph with those nodes taken out), launched in place of
 * the instrumented one while capture is not armed. Mechanism layer: it calls state, log,
 * kcap_gpu (which kernels are ours) and the driver table (common/kcap_cu.h).
 */
#ifndef KCAP_GRAPHEXEC_H
#define KCAP_GRAPHEXEC_H

/* Executable graphs with a twin at once (beyond: no twin, logged once). */
#define KCAP_GRAPHEXEC_MAX 3072

/* The policy's predicate (kcap_capture.c): 1 when the staging nodes must run (capture armed,
 * a shadow candidate on). Until one is set no twin is made (KCAP_GRAPH_TWINS=0 sets none). */
void kcap_graphexec_set_armed(int (*armed)(void));
/* kcap_gpu: staging nodes went into a graph being captured (before that no graph is walked). */
void kcap_graphexec_nodes_added(void);
/* After a successful cudaGraphInstantiate*: `exec` was made from `graph`; `flags` are the
 * instantiation flags when the caller knows them (have_flags), else the exec is asked. Makes
 * the twin when the graph holds kcap nodes; any failure means no twin (logged once). */
void kcap_graphexec_instantiated(void *exec, void *graph, int have_flags, unsigned long long flags);
/* What cudaGraphLaunch(exec, stream) must launch: the twin, or exec itself. per_thread: the
 * stream handle is the runtime's per-thread default stream (0 in a _ptsz call). */
void *kcap_graphexec_pick(void *exec, void *stream, int per_thread);
/* exec is being destroyed or changed (`what`: the call, NULL for a destroy): its twin is
 * destroyed and forgotten first. */
void kcap_graphexec_forget(void *exec, const char *what);
void kcap_graphexec_atfork_child(void); /* the child's table is empty (no CUDA after fork) */

#endif
