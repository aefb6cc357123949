/* CPU feature detection, probed once (see core/cpu.h). */
#include "core/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned attn__cpu_probe(void) {
    __builtin_cpu_init();
    unsigned f = 0;
    if (__builtin_cpu_supports("avx2")) f |= ATTN__CPU_AVX2;
    if (__builtin_cpu_supports("fma")) f |= ATTN__CPU_FMA;
    unsigned int eax, ebx, ecx = 0, edx;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C)) f |= ATTN__CPU_F16C;
    if (__builtin_cpu_supports("avx512f")) f |= ATTN__CPU_AVX512F;
    if (__builtin_cpu_supports("avx512bw")) f |= ATTN__CPU_AVX512BW;
    if (__builtin_cpu_supports("avx512vl")) f |= ATTN__CPU_AVX512VL;
    if (__builtin_cpu_supports("avx512dq")) f |= ATTN__CPU_AVX512DQ;
    if (__builtin_cpu_supports("avx512vnni")) f |= ATTN__CPU_AVX512VNNI;
    return f;
}
#else
static unsigned attn__cpu_probe(void) { return 0; }
#endif

unsigned attn__cpu_features(void) {
    /* every thread computes the same value; relaxed atomics keep it race-free. Bit 31 marks "probed". */
    static unsigned cached = 0;
    unsigned c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (!c) {
        c = attn__cpu_probe() | 0x80000000u;
        __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
    }
    return c & 0x7fffffffu;
}
