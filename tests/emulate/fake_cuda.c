/*
 * A fake CUDA driver + runtime + app for testing the CC emulation shim without a GPU.
 *
 * Built three times from this one file:
 *   -DFAKE_DRIVER  -> libcuda.so.1     (cuGetProcAddress_v2 and the entry points the shim wraps)
 *   -DFAKE_RUNTIME -> libcudart.so     (fetches driver entry points through dlopen + dlsym +
 *                                       cuGetProcAddress_v2, like the real runtime, and records
 *                                       each API call's [start, end] like CUPTI would)
 *   -DFAKE_APP     -> app              (launches kernels and copies through both layers, prints JSON)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;
typedef struct { unsigned int x, y, z; } dim3;
static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
#define DEVICE_TAG 0x7f0000000000ULL /* "device" pointers carry this tag in the fake */

#ifdef FAKE_DRIVER
long long fake_launches, fake_graphs, fake_copies, fake_syncs;
CUresult cuLaunchKernel(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g,
                        unsigned s, CUstream st, void **p, void **x) {
  fake_launches++;
  return 0;
}
CUresult cuGraphLaunch(void *g, CUstream st) { fake_graphs++; return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st) { fake_copies++; return 0; }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st) { fake_copies++; return 0; }
CUresult cuStreamSynchronize(CUstream st) { fake_syncs++; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
  if ((p & DEVICE_TAG) != DEVICE_TAG) return 1;
  *(unsigned *)data = 2;
  return 0;
}
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status) {
  void *p = dlsym(RTLD_DEFAULT, sym);
  if (!strcmp(sym, "cuMemcpyHtoDAsync")) p = (void *)cuMemcpyHtoDAsync_v2;
  if (!strcmp(sym, "cuMemcpyDtoHAsync")) p = (void *)cuMemcpyDtoHAsync_v2;
  if (!p) return 500;
  *pfn = p;
  if (status) *status = 0;
  return 0;
}
#endif

#ifdef FAKE_RUNTIME
/* CUPTI-like record of the last runtime API call's range. */
long long rt_last_start, rt_last_end, rt_range_total;
static CUresult (*d_launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            CUstream, void **, void **);
static CUresult (*d_graph)(void *, CUstream);
static CUresult (*d_h2d)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*d_d2h)(void *, CUdeviceptr, size_t, CUstream);
static void init(void) {
  if (d_launch) return;
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  CUresult (*gpa)(const char *, void **, int, unsigned long long, int *) = dlsym(h, "cuGetProcAddress_v2");
  gpa("cuLaunchKernel", (void **)&d_launch, 13000, 0, NULL);
  gpa("cuGraphLaunch", (void **)&d_graph, 13000, 0, NULL);
  gpa("cuMemcpyHtoDAsync", (void **)&d_h2d, 13000, 0, NULL);
  gpa("cuMemcpyDtoHAsync", (void **)&d_d2h, 13000, 0, NULL);
}
#define RANGE_BEGIN long long t0 = now_ns()
#define RANGE_END rt_last_start = t0, rt_last_end = now_ns(), rt_range_total += rt_last_end - t0
int cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t s, void *st) {
  init();
  RANGE_BEGIN;
  CUresult r = d_launch((void *)f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)s, st, a, NULL);
  RANGE_END;
  return r;
}
int cudaGraphLaunch(void *g, void *st) {
  init();
  RANGE_BEGIN;
  CUresult r = d_graph(g, st);
  RANGE_END;
  return r;
}
int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *st) {
  init();
  RANGE_BEGIN;
  CUresult r = kind == 1 ? d_h2d((CUdeviceptr)(uintptr_t)dst, src, n, st)
                         : d_d2h(dst, (CUdeviceptr)(uintptr_t)src, n, st);
  RANGE_END;
  return r;
}
#endif

#ifdef FAKE_APP
int cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, void *);
int cudaGraphLaunch(void *, void *);
int cudaMemcpyAsync(void *, const void *, size_t, int, void *);
extern long long rt_range_total;
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  dim3 one = {1, 1, 1};
  void (*mark)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "ccdiag_emu_mark_step");
  long long t0 = now_ns();
  for (int i = 0; i < n; i++) cudaLaunchKernel((void *)main, one, one, NULL, 0, NULL);
  long long t_launch = now_ns() - t0;
  long long range_launch = rt_range_total;
  if (mark) mark();
  /* a library launching straight through the driver (like cuBLAS) */
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  CUresult (*direct)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                     void **, void **) = dlsym(h, "cuLaunchKernel");
  t0 = now_ns();
  for (int i = 0; i < n; i++) direct(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
  long long t_direct = now_ns() - t0;
  if (mark) mark();
  cudaGraphLaunch(NULL, NULL);
  static char host[1 << 20];
  CUdeviceptr dev = DEVICE_TAG | 0x1000;
  long long r0 = rt_range_total;
  t0 = now_ns();
  cudaMemcpyAsync((void *)(uintptr_t)dev, host, sizeof host, 1, NULL);
  cudaMemcpyAsync(host, (void *)(uintptr_t)dev, sizeof host, 2, NULL);
  long long t_copy = now_ns() - t0;
  long long range_copy = rt_range_total - r0;
  printf("{\"launch_wall_ns\": %lld, \"launch_range_ns\": %lld, \"direct_wall_ns\": %lld, "
         "\"copy_wall_ns\": %lld, \"copy_range_ns\": %lld}\n",
         t_launch, range_launch, t_direct, t_copy, range_copy);
  return 0;
}
#endif
