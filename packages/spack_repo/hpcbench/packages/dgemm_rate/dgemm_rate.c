/* dgemm-rate: the DGEMM rate one process reaches through its BLAS (all the threads the
 * BLAS is given), the attainable ceiling HPL's efficiency is compared with.
 *
 * usage: dgemm-rate N REPEATS
 * C = A * B with N x N matrices, timed REPEATS times after one untimed warm-up call; prints
 * each repeat, the best and the mean rate (2 N^3 flop per call), and verifies sampled
 * entries of C against dot products computed here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b,
            const int *ldb, const double *beta, double *c, const int *ldc);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double *matrix(size_t n, unsigned seed)
{
    double *m = aligned_alloc(64, ((n * n * sizeof(double) + 63) / 64) * 64);
    if (!m) {
        fprintf(stderr, "dgemm-rate: cannot allocate %zu x %zu doubles\n", n, n);
        exit(2);
    }
    for (size_t i = 0; i < n * n; i++) {
        seed = seed * 1103515245u + 12345u;
        m[i] = (double)(seed >> 8) / (double)(1u << 24) - 0.5;
    }
    return m;
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) < 1 || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: dgemm-rate N REPEATS (both positive)\n");
        return 2;
    }
    const int n = atoi(argv[1]), repeats = atoi(argv[2]);
    const double alpha = 1.0, beta = 0.0, flop = 2.0 * n * (double)n * n;
    double *a = matrix(n, 1), *b = matrix(n, 2), *c = matrix(n, 3);

    printf("dgemm-rate: N=%d repeats=%d\n", n, repeats);
    dgemm_("N", "N", &n, &n, &n, &alpha, a, &n, b, &n, &beta, c, &n);
    double best = 0.0, sum = 0.0;
    for (int r = 1; r <= repeats; r++) {
        double t0 = now();
        dgemm_("N", "N", &n, &n, &n, &alpha, a, &n, b, &n, &beta, c, &n);
        double seconds = now() - t0, rate = flop / seconds / 1e9;
        printf("repeat %d: %.4f s %.3f GFLOP/s\n", r, seconds, rate);
        best = rate > best ? rate : best;
        sum += rate;
    }

    /* Column-major: C(i,j) = sum_l A(i,l) * B(l,j). */
    double worst = 0.0;
    for (int s = 0; s < 16; s++) {
        size_t i = (size_t)(s * 7919) % n, j = (size_t)(s * 104729) % n;
        double expect = 0.0, scale = 0.0;
        for (size_t l = 0; l < (size_t)n; l++) {
            expect += a[i + l * n] * b[l + j * n];
            scale += fabs(a[i + l * n] * b[l + j * n]);
        }
        double err = fabs(c[i + j * n] - expect) / (scale > 0 ? scale : 1.0);
        worst = err > worst ? err : worst;
    }
    printf("best %.3f GFLOP/s mean %.3f GFLOP/s\n", best, sum / repeats);
    printf("max relative error of sampled entries %.3e: %s\n", worst,
           worst < 1e-12 ? "Result verified" : "Result WRONG");
    free(a);
    free(b);
    free(c);
    return worst < 1e-12 ? 0 : 1;
}
