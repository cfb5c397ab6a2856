/* What dgemm-rate (the CPU's, through its BLAS) and dgemm-rate-cuda (a GPU's, through
 * cuBLAS) share, so that both multiply the same matrices and judge the result alike: the
 * matrices' values, the check of sampled entries of C, and the lines
 * hpcbench.benchmarks.dgemm reads.
 */
#ifndef DGEMM_RATE_H
#define DGEMM_RATE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Worst relative error of a sampled entry that still verifies (round-off of an N-term dot
 * product in double precision is far below it). */
#define DGEMM_RATE_TOLERANCE 1e-12

/* An N x N matrix of values uniform in [-0.5, 0.5) from `seed`: never zeros (a GPU
 * multiplying zeros draws less power and runs faster than on real data). */
static double *dgemm_rate_matrix(const char *program, size_t n, unsigned seed)
{
    double *m = (double *)aligned_alloc(64, ((n * n * sizeof(double) + 63) / 64) * 64);
    if (!m) {
        fprintf(stderr, "%s: cannot allocate %zu x %zu doubles\n", program, n, n);
        exit(2);
    }
    for (size_t i = 0; i < n * n; i++) {
        seed = seed * 1103515245u + 12345u;
        m[i] = (double)(seed >> 8) / (double)(1u << 24) - 0.5;
    }
    return m;
}

/* The largest relative error of 16 sampled entries of C = A * B (column-major:
 * C(i,j) = sum_l A(i,l) * B(l,j)) against dot products computed here. */
static double dgemm_rate_worst_error(const double *a, const double *b, const double *c,
                                     size_t n)
{
    double worst = 0.0;
    for (size_t s = 0; s < 16; s++) {
        size_t i = (s * 7919) % n, j = (s * 104729) % n;
        double expect = 0.0, scale = 0.0;
        for (size_t l = 0; l < n; l++) {
            expect += a[i + l * n] * b[l + j * n];
            scale += fabs(a[i + l * n] * b[l + j * n]);
        }
        double err = fabs(c[i + j * n] - expect) / (scale > 0 ? scale : 1.0);
        worst = err > worst ? err : worst;
    }
    return worst;
}

/* The closing lines, and the exit status: 0 when the result verified. */
static int dgemm_rate_report(double best, double sum, int repeats, double worst)
{
    int verified = worst < DGEMM_RATE_TOLERANCE;
    printf("best %.3f GFLOP/s mean %.3f GFLOP/s\n", best, sum / repeats);
    printf("max relative error of sampled entries %.3e: %s\n", worst,
           verified ? "Result verified" : "Result WRONG");
    return verified ? 0 : 1;
}

#endif
