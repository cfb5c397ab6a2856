/* dgemm-rate: the DGEMM rate one process reaches through its BLAS (all the threads the
 * BLAS is given), the attainable ceiling HPL's efficiency is compared with.
 *
 * usage: dgemm-rate N REPEATS
 * C = A * B with N x N matrices, timed REPEATS times after one untimed warm-up call; prints
 * each repeat, the best and the mean rate (2 N^3 flop per call), and verifies sampled
 * entries of C against dot products computed here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dgemm_rate.h"

void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b,
            const int *ldb, const double *beta, double *c, const int *ldc);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) < 1 || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: dgemm-rate N REPEATS (both positive)\n");
        return 2;
    }
    const int n = atoi(argv[1]), repeats = atoi(argv[2]);
    const double alpha = 1.0, beta = 0.0, flop = 2.0 * n * (double)n * n;
    const char *me = "dgemm-rate";
    double *a = dgemm_rate_matrix(me, n, 1), *b = dgemm_rate_matrix(me, n, 2),
           *c = dgemm_rate_matrix(me, n, 3);

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

    int status = dgemm_rate_report(best, sum, repeats, dgemm_rate_worst_error(a, b, c, n));
    free(a);
    free(b);
    free(c);
    return status;
}
