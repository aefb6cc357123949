/* Ends a block opened by core/target_avx512_begin.h. */
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
