/* libhb fast-mode int8 GEMM for x86 (batches of at least HB_Q8_GEMM_S rows: prefill): the packed-panel kernel
 * of matmul_q8_gemm.h at two widths — AVX-512 VNNI (panels of 32 weight rows, 8 rows of x per block) and
 * AVX-VNNI (Alder Lake and later consumer Intel cores: panels of 16 rows, 6 rows of x per block). Each
 * instantiation defines the vector ops and a W × W dword transpose. Holds no state of its own (the
 * template keeps a thread-local panel buffer per width). */
#include "matmul_q8.h"
#if defined(__x86_64__) || defined(__i386__)
#include "matmul_q8_x86.h"

/* ================================ AVX-512 VNNI ================================ */
#define W 16
#define MR 8   /* 16 accumulators, 2 weight loads and 8 broadcasts per 16 vpdpbusd */
#define GEMM_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define GEMM_NAME(x) z_##x
#define VI __m512i
#define VF __m512
#define V_LOAD(p) _mm512_load_si512((const void *)(p))
#define V_STORE(p, v) _mm512_store_si512((void *)(p), v)
#define V_XOR _mm512_xor_si512
#define V_FLIP() _mm512_set1_epi8((char)0x80)
#define V_SET1 _mm512_set1_epi32
#define V_DP hb_dp512
#define V_SUB _mm512_sub_epi32
#define V_CVT _mm512_cvtepi32_ps
#define V_MULF _mm512_mul_ps
#define V_SET1F _mm512_set1_ps
#define V_LOADUF _mm512_loadu_ps
#define V_STOREUF _mm512_storeu_ps
#define V_ZERO _mm512_setzero_si512
#define LOADROW(p, left) _mm512_maskz_loadu_epi8((left) >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (left)) - 1), p)
#define TRANSPOSE hb_transpose16
#include "matmul_q8_gemm.h"
int hb_q8_gemm_i8_vnni(const hb_q8 *m, int lo, int hi) { return z_gemm_i8(m, lo, hi); }
#undef W
#undef MR
#undef GEMM_TGT
#undef GEMM_NAME
#undef VI
#undef VF
#undef V_LOAD
#undef V_STORE
#undef V_XOR
#undef V_FLIP
#undef V_SET1
#undef V_DP
#undef V_SUB
#undef V_CVT
#undef V_MULF
#undef V_SET1F
#undef V_LOADUF
#undef V_STOREUF
#undef V_ZERO
#undef LOADROW
#undef TRANSPOSE

/* ================================ AVX-VNNI (256-bit) ================================ */
#if HB_HAVE_AVXVNNI
#define W 8
#define MR 6   /* 12 accumulators, 2 weights and a broadcast: 15 of the 16 registers */
#define GEMM_TGT __attribute__((target("avx2,fma,avxvnni")))
#define GEMM_NAME(x) y_##x
#define VI __m256i
#define VF __m256
#define V_LOAD(p) _mm256_load_si256((const __m256i *)(p))
#define V_STORE(p, v) _mm256_store_si256((__m256i *)(p), v)
#define V_XOR _mm256_xor_si256
#define V_FLIP() _mm256_set1_epi8((char)0x80)
#define V_SET1 _mm256_set1_epi32
#define V_DP _mm256_dpbusd_avx_epi32
#define V_SUB _mm256_sub_epi32
#define V_CVT _mm256_cvtepi32_ps
#define V_MULF _mm256_mul_ps
#define V_SET1F _mm256_set1_ps
#define V_LOADUF _mm256_loadu_ps
#define V_STOREUF _mm256_storeu_ps
#define V_ZERO _mm256_setzero_si256
#define LOADROW hb_loadrow32
#define TRANSPOSE hb_transpose8
#include "matmul_q8_gemm.h"
int hb_q8_gemm_i8_avxvnni(const hb_q8 *m, int lo, int hi) { return y_gemm_i8(m, lo, hi); }
#endif
#endif
