/* STREAM's four kernels with non-temporal (streaming) stores, for stream.c built with
 * -DTUNED: the Spack recipe puts this file in place of stream.c's "tuned" stubs, where
 * STREAM's static arrays a, b and c are in scope.
 *
 * Why: an ordinary store first reads its cache line (write allocate), traffic STREAM does
 * not count, so compiled STREAM reaches at most about 3/4 of the memory's bandwidth on a
 * CPU whose compiler emits no streaming stores (GCC never does). A streaming store writes
 * the line without reading it, as Intel's compilers do for STREAM unasked. The arithmetic
 * and the arrays are STREAM's; only the stores differ, and STREAM still validates the
 * results. Part of hpcbench (packages/spack_repo/hpcbench/packages/stream). */
#if !defined(__SSE2__)
#error "streaming stores: x86-64 (SSE2) only"
#endif
/* stream.c defines abs() as a macro above this point; stdlib.h (by way of immintrin.h)
 * declares the function. */
#pragma push_macro("abs")
#undef abs
#include <immintrin.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#pragma pop_macro("abs")

_Static_assert(sizeof(STREAM_TYPE) == sizeof(double),
               "streaming stores: STREAM_TYPE double only");

/* The widest vector the target has; a streaming store needs its address aligned to it. */
#if defined(__AVX512F__)
#define NT_DOUBLES 8
#define NT_LOAD _mm512_loadu_pd
#define NT_SET1 _mm512_set1_pd
#define NT_ADD _mm512_add_pd
#define NT_MUL _mm512_mul_pd
#define NT_STORE _mm512_stream_pd
#elif defined(__AVX__)
#define NT_DOUBLES 4
#define NT_LOAD _mm256_loadu_pd
#define NT_SET1 _mm256_set1_pd
#define NT_ADD _mm256_add_pd
#define NT_MUL _mm256_mul_pd
#define NT_STORE _mm256_stream_pd
#else
#define NT_DOUBLES 2
#define NT_LOAD _mm_loadu_pd
#define NT_SET1 _mm_set1_pd
#define NT_ADD _mm_add_pd
#define NT_MUL _mm_mul_pd
#define NT_STORE _mm_stream_pd
#endif

/* This thread's contiguous share of the arrays, as a static schedule would give it. */
static void nt_share(ssize_t *first, ssize_t *end)
{
#ifdef _OPENMP
    ssize_t thread = omp_get_thread_num(), threads = omp_get_num_threads();
#else
    ssize_t thread = 0, threads = 1;
#endif
    *first = (ssize_t) STREAM_ARRAY_SIZE * thread / threads;
    *end = (ssize_t) STREAM_ARRAY_SIZE * (thread + 1) / threads;
}

/* Elements before `dst + first` reaches a vector's alignment (at most `end - first`). */
static ssize_t nt_head(const STREAM_TYPE *dst, ssize_t first, ssize_t end)
{
    ssize_t j = first;
    while (j < end && ((uintptr_t) &dst[j]) % (NT_DOUBLES * sizeof(STREAM_TYPE)) != 0)
        j++;
    return j;
}

/* One kernel: scalar stores up to the alignment, streaming stores of whole vectors, scalar
 * stores for the rest; the fence makes the streaming stores visible before the timer
 * stops (they are weakly ordered). */
#define NT_KERNEL(dst, scalar_expr, vector_expr)                                     \
    _Pragma("omp parallel")                                                          \
    {                                                                                \
        ssize_t j, first, end, aligned;                                              \
        nt_share(&first, &end);                                                      \
        aligned = nt_head(dst, first, end);                                          \
        for (j = first; j < aligned; j++)                                            \
            dst[j] = (scalar_expr);                                                  \
        for (; j + NT_DOUBLES <= end; j += NT_DOUBLES)                               \
            NT_STORE(&dst[j], (vector_expr));                                        \
        for (; j < end; j++)                                                         \
            dst[j] = (scalar_expr);                                                  \
        _mm_sfence();                                                                \
    }

void tuned_STREAM_Copy()
{
    NT_KERNEL(c, a[j], NT_LOAD(&a[j]))
}

void tuned_STREAM_Scale(STREAM_TYPE scalar)
{
    NT_KERNEL(b, scalar * c[j], NT_MUL(NT_SET1(scalar), NT_LOAD(&c[j])))
}

void tuned_STREAM_Add()
{
    NT_KERNEL(c, a[j] + b[j], NT_ADD(NT_LOAD(&a[j]), NT_LOAD(&b[j])))
}

void tuned_STREAM_Triad(STREAM_TYPE scalar)
{
    NT_KERNEL(a, b[j] + scalar * c[j],
              NT_ADD(NT_LOAD(&b[j]), NT_MUL(NT_SET1(scalar), NT_LOAD(&c[j]))))
}
