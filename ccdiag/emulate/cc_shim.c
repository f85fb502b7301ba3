/*
 * ccdiag CC emulation shim (LD_PRELOAD).
 *
 * Injects the host-visible costs of NVIDIA GPU Confidential Computing into a live CUDA
 * workload on an ordinary GPU:
 *
 *   launch  every kernel launch / graph launch pays a toll (busy wait, like CPU-side crypto);
 *   copy_sync  asynchronous host<->device copies (cudaMemcpyAsync, cuMemcpy*Async) wait for
 *              their stream to drain, as under CC (non_blocking=True blocks the CPU thread);
 *   copy_pad   host<->device copies are serialized process-wide (one secure channel per
 *              context) and padded so that each costs toll + bytes / bridge_bandwidth.
 *
 * Two interposition layers:
 *   runtime  the CUDA runtime's exported entry points (cudaLaunchKernel, __cudaLaunchKernel,
 *            cudaLaunchKernelExC, cudaGraphLaunch, cudaMemcpyAsync, cudaMemcpy and _ptsz forms),
 *            by plain symbol interposition. The toll is paid just *before* the runtime call, so
 *            a profiler shows it as host time between API calls.
 *   driver   the driver entry points the runtime (and cuBLAS, NCCL, Triton) fetch through
 *            cuGetProcAddress / dlsym(libcuda): cuLaunchKernel[Ex], cuGraphLaunch, cuMemcpy*.
 *            The toll is then paid *inside* the runtime API call, as under real CC.
 * Each call is handled once: a runtime wrapper leaves the work to the driver wrapper once the
 * driver layer has been seen handling calls; otherwise it does it itself.
 *
 * The driver layer interposes dlsym() itself and is compiled in only with -DCCDIAG_DRIVER_LAYER.
 * Measured on an H200 (driver 580, PyTorch 2.11 + CUDA 13.0): the CUDA runtime and cuBLAS never
 * fetched the public driver launch/copy entry points (0 calls seen), so that layer adds nothing
 * there, while interposing dlsym crashed processes that used CUPTI or CUDA graphs. The default
 * build is therefore runtime-layer only: the toll is paid just before each runtime call.
 *
 * Configuration (environment; all times in ns, bandwidth in bytes/s):
 *   CCDIAG_EMU_MECH          comma list of launch, copy (= copy_pad + copy_sync), copy_pad, copy_sync
 *                            (default: all)
 *   CCDIAG_EMU_LAUNCH_NS     per-launch toll
 *   CCDIAG_EMU_GRAPH_NS      per-graph-launch toll (default: the launch toll)
 *   CCDIAG_EMU_COPY_TOLL_NS  fixed cost per host<->device copy
 *   CCDIAG_EMU_COPY_BW       bridge bandwidth under CC
 *   CCDIAG_EMU_NATIVE_TOLL_NS, CCDIAG_EMU_NATIVE_BW   the same GPU's native copy cost, subtracted
 *                            from the padding so that a copy costs toll + bytes/bw in total
 *   CCDIAG_EMU_LAYER         auto (default) | runtime | driver
 *   CCDIAG_EMU_TOLL_AT       before (default) | after: where the runtime-layer launch toll is paid,
 *                            in the host gap just before the runtime call or just after it returns
 *   CCDIAG_EMU_COPY_PAD_AT   host (default) | gpu: copy padding as a host busy wait after the copy
 *                            (serialized process-wide), or as a delay kernel (ccdiag_emu_copy_pad,
 *                            one thread spinning on %globaltimer) enqueued on the copy's stream right
 *                            after it, so the stream, not the host, carries the cost; a synchronous
 *                            copy then waits for that kernel before it returns
 *   CCDIAG_EMU_LOG           where to write the JSON counters at exit (".<pid>" appended)
 *
 * Control from the workload (dlsym(RTLD_DEFAULT, ...) or ctypes.CDLL(None)):
 *   ccdiag_emu_set_mask(int)  enable mechanisms at run time (bit 0 launch, bit 1 copy_pad,
 *                            bit 2 copy_sync)
 *   ccdiag_emu_mark_step()    start the next step's counters
 *   ccdiag_emu_dump(path)     write the counters now
 *   ccdiag_emu_busy_ns(ns)    busy-wait ns (CPU work that, called through ctypes, releases the GIL)
 *
 * Builds with any C compiler, no CUDA headers needed:  cc -O2 -shared -fPIC cc_shim.c -o
 * libccdiag_cc_shim.so -ldl -lpthread
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef void *CUstream;
typedef void *CUfunction;
typedef void *CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef int cudaError_t;
typedef void *cudaStream_t;
typedef struct { unsigned int x, y, z; } dim3;

#define MECH_LAUNCH 1
#define MECH_COPY 2 /* serialized, padded to toll + bytes/bw (host-side crypto and bounce) */
#define MECH_SYNC 4 /* asynchronous host<->device copies wait for the stream (non_blocking revoked) */
#define MAX_STEPS 8192

enum { DIR_OTHER = 0, DIR_H2D = 1, DIR_D2H = 2 };

/* ------------------------------------------------------------------ configuration */
static int g_mask = MECH_LAUNCH | MECH_COPY | MECH_SYNC;
static long long g_launch_ns, g_graph_ns, g_copy_toll_ns, g_native_toll_ns;
static double g_copy_bw, g_native_bw;
static int g_layer; /* 0 auto, 1 runtime, 2 driver */
static int g_toll_after; /* CCDIAG_EMU_TOLL_AT=after: the runtime-layer toll is paid just after the call */
static int g_pad_gpu;    /* CCDIAG_EMU_COPY_PAD_AT=gpu: copy padding is a delay kernel on the copy's stream */
static char g_log[4096];
static pthread_mutex_t g_copy_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------ counters */
typedef struct {
  long long launches, launch_ns, graph_launches, graph_ns;
  long long copies, copy_bytes, copy_pad_ns, copy_wait_ns, copy_lock_wait_ns;
  long long copy_pad_gpu_ns, copy_pad_kernels;
} step_stats;
static step_stats g_steps[MAX_STEPS];
static int g_step;
static long long g_rt_launch_calls, g_drv_launch_calls, g_rt_copy_calls, g_drv_copy_calls;
static long long g_rt_launch_tolled, g_drv_launch_tolled, g_rt_copy_emulated, g_drv_copy_emulated;
static long long g_copy_dir_unknown, g_pad_kernel_failures;
static int g_drv_launch_seen[2], g_drv_copy_seen; /* [0] kernels, [1] graphs */
static __thread int t_in_rt_launch, t_launch_done, t_in_rt_copy, t_copy_done;

#define ADD(field, v) __atomic_fetch_add(&(field), (v), __ATOMIC_RELAXED)
static step_stats *cur(void) {
  int s = __atomic_load_n(&g_step, __ATOMIC_RELAXED);
  return &g_steps[s < MAX_STEPS ? s : MAX_STEPS - 1];
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
/* Busy wait (CPU-side crypto keeps a core busy), pausing between clock reads so a spinning thread
 * does not flood a VM's clock source or starve a sibling hyperthread. */
static void spin_until(long long t) {
  while (now_ns() < t) {
#if defined(__x86_64__) || defined(__i386__)
    for (int i = 0; i < 8; i++) __builtin_ia32_pause();
#endif
  }
}
static long long env_ll(const char *name, long long dflt) {
  const char *v = getenv(name);
  return v && *v ? atoll(v) : dflt;
}
static double env_d(const char *name, double dflt) {
  const char *v = getenv(name);
  return v && *v ? atof(v) : dflt;
}

/* ------------------------------------------------------------------ real symbols */
static void *(*real_dlsym)(void *, const char *);
static void *g_libcuda;
static CUresult (*drv_stream_sync)(CUstream);
static CUresult (*drv_ctx_sync)(void);
static CUresult (*drv_ptr_attr)(void *, int, CUdeviceptr);
static CUresult (*drv_ctx_get_current)(void **);
static CUresult (*drv_module_load_data)(void **, const void *);
static CUresult (*drv_module_get_function)(CUfunction *, void *, const char *);
static CUresult (*drv_launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, CUstream, void **, void **);
static CUresult (*drv_stream_is_capturing)(CUstream, int *);

static void init_real_dlsym(void) {
  if (real_dlsym) return;
  real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!real_dlsym) real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}
static void *next_sym(const char *name) {
  init_real_dlsym();
  return real_dlsym(RTLD_NEXT, name);
}
static void init_driver_helpers(void) {
  if (drv_stream_sync) return;
  init_real_dlsym();
  if (!g_libcuda) g_libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!g_libcuda) g_libcuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!g_libcuda) return;
  drv_ctx_sync = (CUresult(*)(void))real_dlsym(g_libcuda, "cuCtxSynchronize");
  drv_ptr_attr = (CUresult(*)(void *, int, CUdeviceptr))real_dlsym(g_libcuda, "cuPointerGetAttribute");
  drv_stream_sync = (CUresult(*)(CUstream))real_dlsym(g_libcuda, "cuStreamSynchronize");
  drv_ctx_get_current = (CUresult(*)(void **))real_dlsym(g_libcuda, "cuCtxGetCurrent");
  drv_module_load_data = (CUresult(*)(void **, const void *))real_dlsym(g_libcuda, "cuModuleLoadData");
  drv_module_get_function = (CUresult(*)(CUfunction *, void *, const char *))real_dlsym(g_libcuda, "cuModuleGetFunction");
  drv_launch_kernel = (CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   CUstream, void **, void **))real_dlsym(g_libcuda, "cuLaunchKernel");
  drv_stream_is_capturing = (CUresult(*)(CUstream, int *))real_dlsym(g_libcuda, "cuStreamIsCapturing");
}

/* GPU-side copy padding: a one-thread kernel that spins on %globaltimer for `ns` nanoseconds,
 * launched right after the copy on the copy's stream (the copy's stream is then busy for
 * toll + bytes/bw in all, while the host call returns at once). JIT-compiled by the driver from
 * this PTX at first use, once per process (one CUDA context: the primary one). */
static const char PAD_PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry ccdiag_emu_copy_pad(.param .u64 ns)\n{\n"
    "  .reg .u64 %rd<5>;\n  .reg .pred %p<2>;\n"
    "  ld.param.u64 %rd1, [ns];\n  mov.u64 %rd2, %globaltimer;\n  add.u64 %rd3, %rd2, %rd1;\n"
    "LOOP:\n  mov.u64 %rd4, %globaltimer;\n  setp.lt.u64 %p1, %rd4, %rd3;\n  @%p1 bra LOOP;\n  ret;\n}\n";
static CUfunction g_pad_fn;
static pthread_mutex_t g_pad_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_pad_broken;

/* Launch the delay kernel on `stream`; 0 when it was enqueued. Skipped while the stream is being
 * captured into a CUDA graph. */
static int launch_pad_kernel(CUstream stream, long long ns) {
  init_driver_helpers();
  if (g_pad_broken || !drv_launch_kernel || !drv_module_load_data || !drv_ctx_get_current) return -1;
  void *ctx = NULL;
  if (drv_ctx_get_current(&ctx) != 0 || !ctx) return -1;
  if (drv_stream_is_capturing) {
    int st = 0;
    if (drv_stream_is_capturing(stream, &st) == 0 && st != 0) return -1;
  }
  if (!g_pad_fn) {
    pthread_mutex_lock(&g_pad_lock);
    if (!g_pad_fn) {
      void *mod = NULL;
      CUfunction fn = NULL;
      if (drv_module_load_data(&mod, PAD_PTX) != 0 || drv_module_get_function(&fn, mod, "ccdiag_emu_copy_pad") != 0) {
        g_pad_broken = 1;
        fprintf(stderr, "ccdiag shim: could not load the copy-pad kernel; GPU-side padding is off\n");
      } else {
        g_pad_fn = fn;
      }
    }
    pthread_mutex_unlock(&g_pad_lock);
    if (!g_pad_fn) return -1;
  }
  unsigned long long arg = (unsigned long long)ns;
  void *params[] = {&arg};
  return drv_launch_kernel(g_pad_fn, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ mechanisms */
static void pay_launch_toll(int graph) {
  long long toll = graph ? g_graph_ns : g_launch_ns;
  step_stats *s = cur();
  long long t0 = now_ns();
  if (toll > 0) spin_until(t0 + toll);
  if (graph) {
    ADD(s->graph_launches, 1);
    ADD(s->graph_ns, toll);
  } else {
    ADD(s->launches, 1);
    ADD(s->launch_ns, toll);
  }
}

/* Make a host<->device copy synchronous, serialized and padded. `issue` performs the real call. */
typedef CUresult (*issue_fn)(void *ctx);
static CUresult emulate_copy(size_t bytes, CUstream stream, int is_async, issue_fn issue, void *ctx) {
  step_stats *s = cur();
  long long t_req = now_ns();
  int pad_gpu = g_pad_gpu && (g_mask & MECH_COPY);
  int serialize = (g_mask & MECH_COPY) != 0 && !pad_gpu; /* on the GPU: copies serialize on their streams */
  if (serialize) pthread_mutex_lock(&g_copy_lock);
  long long t_in = now_ns();
  CUresult r = issue(ctx);
  long long t_issued = now_ns();
  long long pad = 0;
  if (g_mask & MECH_COPY) {
    double target = (double)g_copy_toll_ns + (g_copy_bw > 0 ? bytes * 1e9 / g_copy_bw : 0.0);
    double native = (double)g_native_toll_ns + (g_native_bw > 0 ? bytes * 1e9 / g_native_bw : 0.0);
    pad = (long long)(target > native ? target - native : 0.0);
  }
  if (pad_gpu && pad > 0) {
    if (launch_pad_kernel(stream, pad) == 0) {
      ADD(s->copy_pad_gpu_ns, pad);
      ADD(s->copy_pad_kernels, 1);
    } else {
      ADD(g_pad_kernel_failures, 1);
    }
    /* A synchronous copy stays synchronous: it returns once its (longer) GPU copy is done. */
    if (!is_async) {
      init_driver_helpers();
      if (drv_stream_sync) drv_stream_sync(stream);
    }
  }
  if (is_async && (g_mask & MECH_SYNC)) {
    init_driver_helpers();
    if (drv_stream_sync) drv_stream_sync(stream);
  }
  long long t_done = now_ns();
  if (!pad_gpu && pad > 0) spin_until(t_done + pad);
  if (serialize) pthread_mutex_unlock(&g_copy_lock);
  ADD(s->copies, 1);
  ADD(s->copy_bytes, (long long)bytes);
  if (!pad_gpu) ADD(s->copy_pad_ns, pad);
  ADD(s->copy_wait_ns, t_done - t_issued);
  ADD(s->copy_lock_wait_ns, t_in - t_req);
  return r;
}

/* Direction of a unified-address copy from the pointers' memory types. */
static int ptr_is_device(CUdeviceptr p) {
  unsigned int type = 0;
  init_driver_helpers();
  if (!drv_ptr_attr) return -1;
  /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2; CU_MEMORYTYPE_DEVICE = 2, UNIFIED = 4 */
  if (drv_ptr_attr(&type, 2, p) != 0) return 0; /* not known to CUDA: pageable host memory */
  return type == 2 ? 1 : 0;
}
static int unified_direction(CUdeviceptr dst, CUdeviceptr src) {
  int d = ptr_is_device(dst), s = ptr_is_device(src);
  if (d < 0 || s < 0) {
    ADD(g_copy_dir_unknown, 1);
    return DIR_OTHER;
  }
  if (d && !s) return DIR_H2D;
  if (!d && s) return DIR_D2H;
  return DIR_OTHER;
}

/* ================================================================== driver layer */
#define DRV_ACTIVE(mech) ((g_mask & (mech)) && g_layer != 1)
#define COPY_MECHS (MECH_COPY | MECH_SYNC)

static void drv_launch(int graph) {
  ADD(g_drv_launch_calls, 1);
  /* A driver launch inside a runtime launch: the driver layer is reachable for this kind. */
  if (t_in_rt_launch) __atomic_store_n(&g_drv_launch_seen[graph], 1, __ATOMIC_RELAXED);
  if (DRV_ACTIVE(MECH_LAUNCH) && !(t_in_rt_launch && t_launch_done)) {
    pay_launch_toll(graph);
    ADD(g_drv_launch_tolled, 1);
    if (t_in_rt_launch) t_launch_done = 1;
  }
}
#define DEF_LAUNCH(NAME, VAR, PARAMS, ARGS, GRAPH) \
  static CUresult (*real_##NAME##VAR) PARAMS;      \
  static CUresult wrap_##NAME##VAR PARAMS {        \
    drv_launch(GRAPH);                             \
    return real_##NAME##VAR ARGS;                  \
  }

#define LAUNCH_PARAMS (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, \
                       unsigned bz, unsigned smem, CUstream st, void **params, void **extra)
#define LAUNCH_ARGS (f, gx, gy, gz, bx, by, bz, smem, st, params, extra)
DEF_LAUNCH(cuLaunchKernel, , LAUNCH_PARAMS, LAUNCH_ARGS, 0)
DEF_LAUNCH(cuLaunchKernel, _ptsz, LAUNCH_PARAMS, LAUNCH_ARGS, 0)
#define LAUNCHEX_PARAMS (const void *cfg, CUfunction f, void **params, void **extra)
#define LAUNCHEX_ARGS (cfg, f, params, extra)
DEF_LAUNCH(cuLaunchKernelEx, , LAUNCHEX_PARAMS, LAUNCHEX_ARGS, 0)
DEF_LAUNCH(cuLaunchKernelEx, _ptsz, LAUNCHEX_PARAMS, LAUNCHEX_ARGS, 0)
#define COOP_PARAMS (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, \
                     unsigned bz, unsigned smem, CUstream st, void **params)
#define COOP_ARGS (f, gx, gy, gz, bx, by, bz, smem, st, params)
DEF_LAUNCH(cuLaunchCooperativeKernel, , COOP_PARAMS, COOP_ARGS, 0)
DEF_LAUNCH(cuLaunchCooperativeKernel, _ptsz, COOP_PARAMS, COOP_ARGS, 0)
#define GRAPH_PARAMS (CUgraphExec g, CUstream st)
#define GRAPH_ARGS (g, st)
DEF_LAUNCH(cuGraphLaunch, , GRAPH_PARAMS, GRAPH_ARGS, 1)
DEF_LAUNCH(cuGraphLaunch, _ptsz, GRAPH_PARAMS, GRAPH_ARGS, 1)

/* Copies. Each wrapper packs its arguments, and emulate_copy calls back to issue them. */
typedef struct {
  void *fn;
  CUdeviceptr a, b;
  const void *hsrc;
  void *hdst;
  size_t n;
  CUstream st;
} copy_args;

static CUresult issue_h2d_async(void *c) {
  copy_args *x = c;
  return ((CUresult(*)(CUdeviceptr, const void *, size_t, CUstream))x->fn)(x->a, x->hsrc, x->n, x->st);
}
static CUresult issue_d2h_async(void *c) {
  copy_args *x = c;
  return ((CUresult(*)(void *, CUdeviceptr, size_t, CUstream))x->fn)(x->hdst, x->b, x->n, x->st);
}
static CUresult issue_uni_async(void *c) {
  copy_args *x = c;
  return ((CUresult(*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))x->fn)(x->a, x->b, x->n, x->st);
}
static CUresult issue_h2d(void *c) {
  copy_args *x = c;
  return ((CUresult(*)(CUdeviceptr, const void *, size_t))x->fn)(x->a, x->hsrc, x->n);
}
static CUresult issue_d2h(void *c) {
  copy_args *x = c;
  return ((CUresult(*)(void *, CUdeviceptr, size_t))x->fn)(x->hdst, x->b, x->n);
}
static CUresult issue_uni(void *c) {
  copy_args *x = c;
  return ((CUresult(*)(CUdeviceptr, CUdeviceptr, size_t))x->fn)(x->a, x->b, x->n);
}

static CUresult drv_copy(int dir, copy_args *x, int is_async, issue_fn issue) {
  ADD(g_drv_copy_calls, 1);
  if (t_in_rt_copy) __atomic_store_n(&g_drv_copy_seen, 1, __ATOMIC_RELAXED);
  if (dir == DIR_OTHER || !DRV_ACTIVE(COPY_MECHS) || (t_in_rt_copy && t_copy_done)) return issue(x);
  if (t_in_rt_copy) t_copy_done = 1;
  ADD(g_drv_copy_emulated, 1);
  return emulate_copy(x->n, x->st, is_async, issue, x);
}

#define DEF_COPY(NAME, VAR, PARAMS, FILL, DIR, ASYNC, ISSUE)      \
  static CUresult (*real_##NAME##VAR) PARAMS;                     \
  static CUresult wrap_##NAME##VAR PARAMS {                       \
    copy_args x = {0};                                            \
    x.fn = (void *)real_##NAME##VAR;                              \
    FILL;                                                         \
    return drv_copy(DIR, &x, ASYNC, ISSUE);                       \
  }

#define H2DA_P (CUdeviceptr dst, const void *src, size_t n, CUstream st)
#define H2DA_F (x.a = dst, x.hsrc = src, x.n = n, x.st = st)
DEF_COPY(cuMemcpyHtoDAsync, , H2DA_P, H2DA_F, DIR_H2D, 1, issue_h2d_async)
DEF_COPY(cuMemcpyHtoDAsync, _ptsz, H2DA_P, H2DA_F, DIR_H2D, 1, issue_h2d_async)
#define D2HA_P (void *dst, CUdeviceptr src, size_t n, CUstream st)
#define D2HA_F (x.hdst = dst, x.b = src, x.n = n, x.st = st)
DEF_COPY(cuMemcpyDtoHAsync, , D2HA_P, D2HA_F, DIR_D2H, 1, issue_d2h_async)
DEF_COPY(cuMemcpyDtoHAsync, _ptsz, D2HA_P, D2HA_F, DIR_D2H, 1, issue_d2h_async)
#define UNIA_P (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st)
#define UNIA_F (x.a = dst, x.b = src, x.n = n, x.st = st)
DEF_COPY(cuMemcpyAsync, , UNIA_P, UNIA_F, unified_direction(dst, src), 1, issue_uni_async)
DEF_COPY(cuMemcpyAsync, _ptsz, UNIA_P, UNIA_F, unified_direction(dst, src), 1, issue_uni_async)
#define H2D_P (CUdeviceptr dst, const void *src, size_t n)
#define H2D_F (x.a = dst, x.hsrc = src, x.n = n)
DEF_COPY(cuMemcpyHtoD, , H2D_P, H2D_F, DIR_H2D, 0, issue_h2d)
DEF_COPY(cuMemcpyHtoD, _ptds, H2D_P, H2D_F, DIR_H2D, 0, issue_h2d)
#define D2H_P (void *dst, CUdeviceptr src, size_t n)
#define D2H_F (x.hdst = dst, x.b = src, x.n = n)
DEF_COPY(cuMemcpyDtoH, , D2H_P, D2H_F, DIR_D2H, 0, issue_d2h)
DEF_COPY(cuMemcpyDtoH, _ptds, D2H_P, D2H_F, DIR_D2H, 0, issue_d2h)
#define UNI_P (CUdeviceptr dst, CUdeviceptr src, size_t n)
#define UNI_F (x.a = dst, x.b = src, x.n = n)
DEF_COPY(cuMemcpy, , UNI_P, UNI_F, unified_direction(dst, src), 0, issue_uni)
DEF_COPY(cuMemcpy, _ptds, UNI_P, UNI_F, unified_direction(dst, src), 0, issue_uni)

#ifdef CCDIAG_DRIVER_LAYER
/* Replace a driver function pointer by its wrapper; remember the real one. */
#define SWAP(NAME, VAR)                                   \
  if (!strcmp(symbol, #NAME)) {                           \
    if (!real_##NAME##VAR) real_##NAME##VAR = (void *)*pfn; \
    if ((void *)*pfn == (void *)real_##NAME##VAR) *pfn = (void *)wrap_##NAME##VAR; \
    return;                                               \
  }
static void wrap_driver_pointer(const char *symbol, void **pfn, int per_thread) {
  if (!symbol || !pfn || !*pfn || symbol[0] != 'c' || symbol[1] != 'u') return;
  if (per_thread) {
    SWAP(cuLaunchKernel, _ptsz) SWAP(cuLaunchKernelEx, _ptsz) SWAP(cuLaunchCooperativeKernel, _ptsz)
    SWAP(cuGraphLaunch, _ptsz) SWAP(cuMemcpyHtoDAsync, _ptsz) SWAP(cuMemcpyDtoHAsync, _ptsz)
    SWAP(cuMemcpyAsync, _ptsz) SWAP(cuMemcpyHtoD, _ptds) SWAP(cuMemcpyDtoH, _ptds) SWAP(cuMemcpy, _ptds)
  } else {
    SWAP(cuLaunchKernel, ) SWAP(cuLaunchKernelEx, ) SWAP(cuLaunchCooperativeKernel, )
    SWAP(cuGraphLaunch, ) SWAP(cuMemcpyHtoDAsync, ) SWAP(cuMemcpyDtoHAsync, ) SWAP(cuMemcpyAsync, )
    SWAP(cuMemcpyHtoD, ) SWAP(cuMemcpyDtoH, ) SWAP(cuMemcpy, )
  }
}

/* Map an exported driver symbol name (with its version suffix) to the generic name. */
static const char *generic_name(const char *symbol, int *per_thread) {
  static const struct { const char *exported, *generic; int pt; } map[] = {
      {"cuLaunchKernel", "cuLaunchKernel", 0}, {"cuLaunchKernel_ptsz", "cuLaunchKernel", 1},
      {"cuLaunchKernelEx", "cuLaunchKernelEx", 0}, {"cuLaunchKernelEx_ptsz", "cuLaunchKernelEx", 1},
      {"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", 0},
      {"cuLaunchCooperativeKernel_ptsz", "cuLaunchCooperativeKernel", 1},
      {"cuGraphLaunch", "cuGraphLaunch", 0}, {"cuGraphLaunch_ptsz", "cuGraphLaunch", 1},
      {"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync", 0}, {"cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyHtoDAsync", 1},
      {"cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync", 0}, {"cuMemcpyDtoHAsync_v2_ptsz", "cuMemcpyDtoHAsync", 1},
      {"cuMemcpyAsync", "cuMemcpyAsync", 0}, {"cuMemcpyAsync_ptsz", "cuMemcpyAsync", 1},
      {"cuMemcpyHtoD_v2", "cuMemcpyHtoD", 0}, {"cuMemcpyHtoD_v2_ptds", "cuMemcpyHtoD", 1},
      {"cuMemcpyDtoH_v2", "cuMemcpyDtoH", 0}, {"cuMemcpyDtoH_v2_ptds", "cuMemcpyDtoH", 1},
      {"cuMemcpy", "cuMemcpy", 0}, {"cuMemcpy_ptds", "cuMemcpy", 1},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (!strcmp(symbol, map[i].exported)) {
      *per_thread = map[i].pt;
      return map[i].generic;
    }
  return NULL;
}

typedef CUresult (*gpa_v2_t)(const char *, void **, int, unsigned long long, int *);
typedef CUresult (*gpa_t)(const char *, void **, int, unsigned long long);
static gpa_v2_t real_gpa_v2;
static gpa_t real_gpa;
#define PER_THREAD_FLAG 2ULL /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */

static CUresult my_gpa_v2(const char *symbol, void **pfn, int ver, unsigned long long flags, int *status) {
  CUresult r = real_gpa_v2(symbol, pfn, ver, flags, status);
  if (r == 0 && ver >= 12000) wrap_driver_pointer(symbol, pfn, (flags & PER_THREAD_FLAG) != 0);
  return r;
}
static CUresult my_gpa(const char *symbol, void **pfn, int ver, unsigned long long flags) {
  CUresult r = real_gpa(symbol, pfn, ver, flags);
  if (r == 0 && ver >= 12000) wrap_driver_pointer(symbol, pfn, (flags & PER_THREAD_FLAG) != 0);
  return r;
}

/* dlsym(RTLD_NEXT / RTLD_DEFAULT) depends on who calls it. Since every call now comes from this
 * library, resolve those two relative to the original caller's link map (in glibc a link_map is a
 * valid dlopen handle). */
static void *caller_relative(void *handle, const char *symbol, const void *caller) {
  Dl_info info;
  struct link_map *lm = NULL;
  if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return real_dlsym(handle, symbol);
  if (handle == RTLD_NEXT) {
    for (struct link_map *l = lm->l_next; l; l = l->l_next) {
      void *p = real_dlsym(l, symbol);
      if (p) return p;
    }
    return NULL;
  }
  void *p = real_dlsym(RTLD_DEFAULT, symbol);
  return p ? p : real_dlsym(lm, symbol); /* a caller loaded RTLD_LOCAL also sees its own scope */
}

/* Every dlsym in the process passes here: hand out wrappers for the driver entry points. */
void *dlsym(void *handle, const char *symbol) {
  init_real_dlsym();
  void *p = (handle == RTLD_NEXT || handle == RTLD_DEFAULT)
                ? caller_relative(handle, symbol, __builtin_return_address(0))
                : real_dlsym(handle, symbol);
  if (!p || symbol[0] != 'c' || symbol[1] != 'u' || g_layer == 1) return p;
  if (!strcmp(symbol, "cuGetProcAddress_v2")) {
    real_gpa_v2 = (gpa_v2_t)p;
    return (void *)my_gpa_v2;
  }
  if (!strcmp(symbol, "cuGetProcAddress")) {
    real_gpa = (gpa_t)p;
    return (void *)my_gpa;
  }
  int pt = 0;
  const char *generic = generic_name(symbol, &pt);
  if (generic) wrap_driver_pointer(generic, &p, pt);
  return p;
}
#endif /* CCDIAG_DRIVER_LAYER */

/* ================================================================== runtime layer */
#define RT_ACTIVE(mech) ((g_mask & (mech)) && g_layer != 2)

static int rt_should_toll(int graph) {
  /* Toll outside the runtime call only while the driver layer has not shown it works. */
  return RT_ACTIVE(MECH_LAUNCH) && (g_layer == 1 || !__atomic_load_n(&g_drv_launch_seen[graph], __ATOMIC_RELAXED));
}
static void rt_launch_enter(int graph) {
  ADD(g_rt_launch_calls, 1);
  t_in_rt_launch = 1;
  t_launch_done = 0;
  if (!g_toll_after && rt_should_toll(graph)) {
    pay_launch_toll(graph);
    ADD(g_rt_launch_tolled, 1);
    t_launch_done = 1;
  }
}
static void rt_launch_exit(int graph) {
  /* CCDIAG_EMU_TOLL_AT=after: the same toll, paid in the gap just after the call returns. */
  if (g_toll_after && !t_launch_done && rt_should_toll(graph)) {
    pay_launch_toll(graph);
    ADD(g_rt_launch_tolled, 1);
  }
  t_in_rt_launch = 0;
}

#define DEF_RT_LAUNCH(NAME, PARAMS, ARGS, GRAPH)        \
  cudaError_t NAME PARAMS {                             \
    static cudaError_t(*real) PARAMS;                   \
    if (!real) real = next_sym(#NAME);                  \
    rt_launch_enter(GRAPH);                             \
    cudaError_t r = real ARGS;                          \
    rt_launch_exit(GRAPH);                              \
    return r;                                           \
  }
#define RTL_P (const void *f, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t st)
#define RTL_A (f, g, b, args, smem, st)
DEF_RT_LAUNCH(cudaLaunchKernel, RTL_P, RTL_A, 0)
DEF_RT_LAUNCH(cudaLaunchKernel_ptsz, RTL_P, RTL_A, 0)
DEF_RT_LAUNCH(__cudaLaunchKernel, RTL_P, RTL_A, 0)
DEF_RT_LAUNCH(__cudaLaunchKernel_ptsz, RTL_P, RTL_A, 0)
#define RTX_P (const void *cfg, const void *f, void **args)
#define RTX_A (cfg, f, args)
DEF_RT_LAUNCH(cudaLaunchKernelExC, RTX_P, RTX_A, 0)
DEF_RT_LAUNCH(cudaLaunchKernelExC_ptsz, RTX_P, RTX_A, 0)
#define RTG_P (void *g, cudaStream_t st)
#define RTG_A (g, st)
DEF_RT_LAUNCH(cudaGraphLaunch, RTG_P, RTG_A, 1)
DEF_RT_LAUNCH(cudaGraphLaunch_ptsz, RTG_P, RTG_A, 1)

/* cudaMemcpyKind: 0 HtoH, 1 HtoD, 2 DtoH, 3 DtoD, 4 Default */
static int rt_direction(const void *dst, const void *src, int kind) {
  if (kind == 1) return DIR_H2D;
  if (kind == 2) return DIR_D2H;
  if (kind == 4) return unified_direction((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src);
  return DIR_OTHER;
}

typedef struct {
  void *fn;
  void *dst;
  const void *src;
  size_t n;
  int kind;
  cudaStream_t st;
  int async;
} rt_copy_args;
static CUresult rt_issue(void *c) {
  rt_copy_args *x = c;
  if (x->async)
    return ((cudaError_t(*)(void *, const void *, size_t, int, cudaStream_t))x->fn)(x->dst, x->src, x->n, x->kind, x->st);
  return ((cudaError_t(*)(void *, const void *, size_t, int))x->fn)(x->dst, x->src, x->n, x->kind);
}

static cudaError_t rt_copy(rt_copy_args *x) {
  ADD(g_rt_copy_calls, 1);
  int dir = rt_direction(x->dst, x->src, x->kind);
  int drv_ok = g_layer != 1 && __atomic_load_n(&g_drv_copy_seen, __ATOMIC_RELAXED);
  if (dir == DIR_OTHER || !RT_ACTIVE(MECH_COPY | MECH_SYNC) || drv_ok) {
    t_in_rt_copy = 1;
    t_copy_done = 0;
    cudaError_t r = rt_issue(x);
    t_in_rt_copy = 0;
    return r;
  }
  /* Runtime layer does the emulation; keep the driver layer out of this call. */
  t_in_rt_copy = 1;
  t_copy_done = 1;
  ADD(g_rt_copy_emulated, 1);
  cudaError_t r = emulate_copy(x->n, x->st, x->async, rt_issue, x);
  t_in_rt_copy = 0;
  return r;
}

#define DEF_RT_COPY_ASYNC(NAME)                                                              \
  cudaError_t NAME(void *dst, const void *src, size_t n, int kind, cudaStream_t st) {        \
    static void *real;                                                                       \
    if (!real) real = next_sym(#NAME);                                                       \
    rt_copy_args x = {real, dst, src, n, kind, st, 1};                                       \
    return rt_copy(&x);                                                                      \
  }
DEF_RT_COPY_ASYNC(cudaMemcpyAsync)
DEF_RT_COPY_ASYNC(cudaMemcpyAsync_ptsz)

#define DEF_RT_COPY_SYNC(NAME)                                                 \
  cudaError_t NAME(void *dst, const void *src, size_t n, int kind) {           \
    static void *real;                                                         \
    if (!real) real = next_sym(#NAME);                                         \
    rt_copy_args x = {real, dst, src, n, kind, NULL, 0};                       \
    return rt_copy(&x);                                                        \
  }
DEF_RT_COPY_SYNC(cudaMemcpy)
DEF_RT_COPY_SYNC(cudaMemcpy_ptds)

/* ================================================================== control + output */
void ccdiag_emu_set_mask(int mask) { __atomic_store_n(&g_mask, mask, __ATOMIC_RELAXED); }
int ccdiag_emu_get_mask(void) { return g_mask; }
void ccdiag_emu_mark_step(void) {
  int s = __atomic_load_n(&g_step, __ATOMIC_RELAXED);
  if (s < MAX_STEPS - 1) __atomic_store_n(&g_step, s + 1, __ATOMIC_RELAXED);
}
int ccdiag_emu_current_step(void) { return g_step; }
/* CPU work for workloads that must not hold Python's GIL while they compute (ctypes releases it). */
void ccdiag_emu_busy_ns(long long ns) { spin_until(now_ns() + ns); }

int ccdiag_emu_dump(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\n \"config\": {\"mask\": %d, \"layer\": \"%s\", \"launch_ns\": %lld, \"graph_ns\": %lld, "
             "\"copy_toll_ns\": %lld, \"copy_bw\": %.1f, \"native_toll_ns\": %lld, \"native_bw\": %.1f, "
             "\"toll_at\": \"%s\", \"copy_pad_at\": \"%s\"},\n",
          g_mask, g_layer == 1 ? "runtime" : g_layer == 2 ? "driver" : "auto", g_launch_ns, g_graph_ns,
          g_copy_toll_ns, g_copy_bw, g_native_toll_ns, g_native_bw, g_toll_after ? "after" : "before",
          g_pad_gpu ? "gpu" : "host");
  fprintf(f, " \"calls\": {\"runtime_launch\": %lld, \"driver_launch\": %lld, \"runtime_launch_tolled\": %lld, "
             "\"driver_launch_tolled\": %lld, \"runtime_copy\": %lld, \"driver_copy\": %lld, "
             "\"runtime_copy_emulated\": %lld, \"driver_copy_emulated\": %lld, \"copy_direction_unknown\": %lld, "
             "\"driver_launch_layer_seen\": %d, \"driver_graph_layer_seen\": %d, \"driver_copy_layer_seen\": %d, "
             "\"copy_pad_kernel_failures\": %lld},\n",
          g_rt_launch_calls, g_drv_launch_calls, g_rt_launch_tolled, g_drv_launch_tolled, g_rt_copy_calls,
          g_drv_copy_calls, g_rt_copy_emulated, g_drv_copy_emulated, g_copy_dir_unknown, g_drv_launch_seen[0],
          g_drv_launch_seen[1], g_drv_copy_seen, g_pad_kernel_failures);
  fprintf(f, " \"steps\": [\n");
  int last = g_step < MAX_STEPS ? g_step : MAX_STEPS - 1;
  for (int i = 0; i <= last; i++) {
    step_stats *s = &g_steps[i];
    fprintf(f, "  {\"step\": %d, \"launches\": %lld, \"launch_ns\": %lld, \"graph_launches\": %lld, \"graph_ns\": %lld, "
               "\"copies\": %lld, \"copy_bytes\": %lld, \"copy_pad_ns\": %lld, \"copy_wait_ns\": %lld, "
               "\"copy_lock_wait_ns\": %lld, \"copy_pad_gpu_ns\": %lld, \"copy_pad_kernels\": %lld}%s\n",
            i, s->launches, s->launch_ns, s->graph_launches, s->graph_ns, s->copies, s->copy_bytes, s->copy_pad_ns,
            s->copy_wait_ns, s->copy_lock_wait_ns, s->copy_pad_gpu_ns, s->copy_pad_kernels, i < last ? "," : "");
  }
  fprintf(f, " ]\n}\n");
  fclose(f);
  return 0;
}

__attribute__((constructor)) static void ccdiag_emu_init(void) {
  init_real_dlsym();
  const char *mech = getenv("CCDIAG_EMU_MECH");
  if (mech) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", mech);
    g_mask = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
      if (!strcmp(tok, "launch")) g_mask |= MECH_LAUNCH;
      if (!strcmp(tok, "copy")) g_mask |= MECH_COPY | MECH_SYNC; /* "copy" = both parts */
      if (!strcmp(tok, "copy_pad")) g_mask |= MECH_COPY;
      if (!strcmp(tok, "copy_sync")) g_mask |= MECH_SYNC;
    }
  }
  g_launch_ns = env_ll("CCDIAG_EMU_LAUNCH_NS", 0);
  g_graph_ns = env_ll("CCDIAG_EMU_GRAPH_NS", g_launch_ns);
  g_copy_toll_ns = env_ll("CCDIAG_EMU_COPY_TOLL_NS", 0);
  g_copy_bw = env_d("CCDIAG_EMU_COPY_BW", 0);
  g_native_toll_ns = env_ll("CCDIAG_EMU_NATIVE_TOLL_NS", 0);
  g_native_bw = env_d("CCDIAG_EMU_NATIVE_BW", 0);
  const char *layer = getenv("CCDIAG_EMU_LAYER");
  g_layer = layer && !strcmp(layer, "runtime") ? 1 : layer && !strcmp(layer, "driver") ? 2 : 0;
  const char *at = getenv("CCDIAG_EMU_TOLL_AT");
  g_toll_after = at && !strcmp(at, "after");
  const char *pad_at = getenv("CCDIAG_EMU_COPY_PAD_AT");
  g_pad_gpu = pad_at && !strcmp(pad_at, "gpu");
  const char *log = getenv("CCDIAG_EMU_LOG");
  if (log) snprintf(g_log, sizeof g_log, "%s.%d", log, (int)getpid());
}

__attribute__((destructor)) static void ccdiag_emu_fini(void) {
  if (g_log[0]) ccdiag_emu_dump(g_log);
}
