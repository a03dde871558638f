/* libhb SIMD dispatch: detects the best instruction set once and holds the level in use.
 * State: `detected` (what the CPU and OS support), `avxvnni` (the 256-bit VEX VNNI is there) and `level`
 * (what kernels use; tests force it down with hb_simd_force, and the env var
 * HB_SIMD=scalar|avx2|avxvnni|avx512|avx512vnni|amx caps it at start).
 * x86: AMX (with AVX-512 VNNI, the tile state granted by Linux) / AVX-512 F+BW+VL(+VNNI) / AVX2+FMA+F16C(+AVX-VNNI) /
 * scalar via __builtin_cpu_supports (which also checks that the OS saves the vector state). Levels are ordered; a
 * CPU with AVX-512 but without AVX-VNNI (Ice Lake, Cascade Lake) capped at the AVX-VNNI level gets AVX2. aarch64:
 * NEON (dotprod noted in hb_cpu_dotprod). Also the calling thread's CPU clock (timings that a busy machine's
 * scheduling must not skew: tokenizer-audit.ts). */
#include "hb.h"
#include <time.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static atomic_int detected = -1, level = -1;
static int avxvnni;                      /* x86: AVX-VNNI (VEX vpdpbusd) supported; set by detect() */
int hb_cpu_dotprod;                      /* aarch64 SDOT/UDOT available (for later int8 kernels) */

static const char *const names[] = { "scalar", "neon", "avx2", "avxvnni", "avx512", "avx512vnni", "amx" };

#if defined(__x86_64__) || defined(__i386__)
/* CPUID.(EAX=7, ECX=1):EAX bit 4 = AVX-VNNI (the YMM state is known saved once AVX2 is usable) */
static int cpuid_avxvnni(void) {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
}
#endif

#if HB_HAVE_AMX
#include <sys/syscall.h>
#include <unistd.h>
/* CPUID.(EAX=7, ECX=0):EDX bits 24, 25 = AMX-TILE, AMX-INT8 (and ECX bit 8 = GFNI, which the int4g unpack uses; every
 * AMX CPU has it); then Linux must grant this process the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA = 18; once for the process and all its threads) */
static int amx_usable(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 24 & 1) || !(d >> 25 & 1) || !(c >> 8 & 1)) return 0;
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}
#endif

static int detect(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  avxvnni = avx2 && HB_HAVE_AVXVNNI && cpuid_avxvnni();
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return !__builtin_cpu_supports("avx512vnni") ? HB_AVX512 : HB_HAVE_AMX && amx_usable() ? HB_AMX : HB_AVX512VNNI;
  return avxvnni ? HB_AVXVNNI : avx2 ? HB_AVX2 : HB_SCALAR;
#elif defined(__aarch64__)
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
  hb_cpu_dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#elif defined(__APPLE__)
  hb_cpu_dotprod = 1;                    /* every Apple arm64 core has it */
#endif
  return HB_NEON;
#else
  return HB_SCALAR;
#endif
}

static int best(void) {
  int d = atomic_load(&detected);
  if (d < 0) {
    d = detect();
    const char *env = getenv("HB_SIMD");
    if (env)
      for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (!strcmp(env, names[i]) && i < d) d = (i == HB_NEON) ? HB_SCALAR : i;
    if (d == HB_AVXVNNI && !avxvnni) d = HB_AVX2;
    atomic_store(&detected, d);
  }
  return d;
}

int hb_simd_level(void) {
  int l = atomic_load_explicit(&level, memory_order_relaxed);
  if (l < 0) { l = best(); atomic_store(&level, l); }
  return l;
}

const char *hb_simd_name(void) { return names[hb_simd_level()]; }

double hb_thread_cpu_us(void) {
  struct timespec t;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return -1.0;
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int hb_simd_force(int want) {
  int b = best(), l;
  if (want <= 0) l = HB_SCALAR;
  else if (want == 1) l = b;
  else l = want < b ? want : b;
  /* a capped x86 level must not land on NEON, nor on AVX-VNNI where only the AVX-512 form exists */
  if (l == HB_NEON && b != HB_NEON) l = HB_SCALAR;
  if (l == HB_AVXVNNI && !avxvnni) l = HB_AVX2;
  atomic_store(&level, l);
  return l;
}
