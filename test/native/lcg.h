/* The fixed LCG of the test/native drivers: the same random data on every machine and level. */
#ifndef HB_TEST_LCG_H
#define HB_TEST_LCG_H
static unsigned long long seed = 88172645463325252ull;
static unsigned rnd(void) { seed = seed * 6364136223846793005ull + 1442695040888963407ull; return (unsigned)(seed >> 33); }
static float rndf(void) { return (float)rnd() / 2147483648.0f - 1.0f; } /* [-1, 1) */
#endif
