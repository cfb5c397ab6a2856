/* dgemm-rate-cuda: the DGEMM rate one GPU reaches through cuBLAS, the attainable ceiling of
 * its FP64 work, printed as dgemm-rate prints the CPU's (hpcbench.benchmarks.dgemm reads
 * both), on the same matrices, verified alike (dgemm_rate.h).
 *
 * usage: dgemm-rate-cuda N REPEATS
 * C = A * B with N x N matrices of random values (never zeros), timed REPEATS times with
 * CUDA events after one untimed warm-up call; prints the device, each repeat, the best and
 * the mean rate (2 N^3 flop per call), and verifies sampled entries of C against dot
 * products computed on the host.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "dgemm_rate.h"

static const char *me = "dgemm-rate-cuda";

#define CHECK(call, what)                                                               \
    do {                                                                                \
        cudaError_t err_ = (call);                                                      \
        if (err_ != cudaSuccess) {                                                      \
            fprintf(stderr, "%s: %s: %s\n", me, what, cudaGetErrorString(err_));        \
            exit(2);                                                                    \
        }                                                                               \
    } while (0)

#define CHECK_BLAS(call, what)                                                          \
    do {                                                                                \
        cublasStatus_t st_ = (call);                                                    \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                             \
            fprintf(stderr, "%s: %s: cuBLAS status %d\n", me, what, (int)st_);          \
            exit(2);                                                                    \
        }                                                                               \
    } while (0)

static double *on_device(const double *host, size_t n)
{
    double *device = NULL;
    CHECK(cudaMalloc((void **)&device, n * n * sizeof(double)), "allocating on the device");
    CHECK(cudaMemcpy(device, host, n * n * sizeof(double), cudaMemcpyHostToDevice),
          "copying to the device");
    return device;
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) < 1 || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: %s N REPEATS (both positive)\n", me);
        return 2;
    }
    const int n = atoi(argv[1]), repeats = atoi(argv[2]);
    const double alpha = 1.0, beta = 0.0, flop = 2.0 * n * (double)n * n;

    int device = 0;
    struct cudaDeviceProp prop;
    CHECK(cudaGetDevice(&device), "finding the device");
    CHECK(cudaGetDeviceProperties(&prop, device), "reading the device's properties");
    printf("device: %s sm_%d%d memory=%zu\n", prop.name, prop.major, prop.minor,
           prop.totalGlobalMem);

    double *a = dgemm_rate_matrix(me, n, 1), *b = dgemm_rate_matrix(me, n, 2),
           *c = dgemm_rate_matrix(me, n, 3);
    double *da = on_device(a, n), *db = on_device(b, n), *dc = on_device(c, n);
    cublasHandle_t handle;
    CHECK_BLAS(cublasCreate(&handle), "starting cuBLAS");
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start), "creating an event");
    CHECK(cudaEventCreate(&stop), "creating an event");

    printf("dgemm-rate: N=%d repeats=%d\n", n, repeats);
    CHECK_BLAS(cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, da, n, db, n,
                           &beta, dc, n), "the warm-up call");
    CHECK(cudaDeviceSynchronize(), "the warm-up call");
    double best = 0.0, sum = 0.0;
    for (int r = 1; r <= repeats; r++) {
        CHECK(cudaEventRecord(start, 0), "recording the start");
        CHECK_BLAS(cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, da, n, db,
                               n, &beta, dc, n), "a timed call");
        CHECK(cudaEventRecord(stop, 0), "recording the end");
        CHECK(cudaEventSynchronize(stop), "a timed call");
        float ms = 0.0f;
        CHECK(cudaEventElapsedTime(&ms, start, stop), "timing a call");
        double seconds = ms / 1e3, rate = flop / seconds / 1e9;
        printf("repeat %d: %.4f s %.3f GFLOP/s\n", r, seconds, rate);
        /* Each line as it comes: a power sampler beside it is matched to the calls. */
        fflush(stdout);
        best = rate > best ? rate : best;
        sum += rate;
    }
    CHECK(cudaMemcpy(c, dc, (size_t)n * n * sizeof(double), cudaMemcpyDeviceToHost),
          "copying the result back");

    int status = dgemm_rate_report(best, sum, repeats, dgemm_rate_worst_error(a, b, c, n));
    cublasDestroy(handle);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    free(a);
    free(b);
    free(c);
    return status;
}
