/* Included where a block of code is to be compiled for AVX-512 F/VL/BW + VNNI (with AVX2, FMA, F16C;
 * used only after the CPU check, core/cpu.c): gcc applies a target pragma, clang (used by `make fuzz`)
 * the same target attribute to every function. Close the block with core/target_avx512_end.h. No
 * include guard: one per block. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c")
#endif
