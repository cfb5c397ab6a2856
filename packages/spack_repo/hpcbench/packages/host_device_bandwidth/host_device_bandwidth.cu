/* host-device-bandwidth: how fast one GPU's link to its host moves data, each direction,
 * from pinned (page-locked) and from pageable host memory, and a copy within the device.
 *
 * usage: host-device-bandwidth BYTES REPEATS
 * Each copy of BYTES is timed REPEATS times with CUDA events after one untimed copy; prints
 * one line per direction and memory kind: every rate, the best and the mean (GB/s, 10^9
 * bytes). The data copied are checked after the last copy of each kind.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *me = "host-device-bandwidth";

#define CHECK(call, what)                                                               \
    do {                                                                                \
        cudaError_t err_ = (call);                                                      \
        if (err_ != cudaSuccess) {                                                      \
            fprintf(stderr, "%s: %s: %s\n", me, what, cudaGetErrorString(err_));        \
            exit(2);                                                                    \
        }                                                                               \
    } while (0)

static double timed(void *to, const void *from, size_t bytes, enum cudaMemcpyKind kind,
                    cudaEvent_t start, cudaEvent_t stop)
{
    float ms = 0.0f;
    CHECK(cudaEventRecord(start, 0), "recording the start");
    CHECK(cudaMemcpy(to, from, bytes, kind), "a copy");
    CHECK(cudaEventRecord(stop, 0), "recording the end");
    CHECK(cudaEventSynchronize(stop), "a copy");
    CHECK(cudaEventElapsedTime(&ms, start, stop), "timing a copy");
    return bytes / (ms / 1e3) / 1e9;
}

static void measure(const char *name, void *to, const void *from, size_t bytes,
                    enum cudaMemcpyKind kind, int repeats, cudaEvent_t start, cudaEvent_t stop)
{
    double best = 0.0, sum = 0.0;
    CHECK(cudaMemcpy(to, from, bytes, kind), "the untimed copy");
    printf("%s:", name);
    for (int r = 0; r < repeats; r++) {
        double rate = timed(to, from, bytes, kind, start, stop);
        printf(" %.2f", rate);
        best = rate > best ? rate : best;
        sum += rate;
    }
    printf(" GB/s; best %.2f mean %.2f\n", best, sum / repeats);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoll(argv[1]) < 1 || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: %s BYTES REPEATS (both positive)\n", me);
        return 2;
    }
    const size_t bytes = (size_t)atoll(argv[1]);
    const int repeats = atoi(argv[2]);
    struct cudaDeviceProp prop;
    int device = 0;
    CHECK(cudaGetDevice(&device), "finding the device");
    CHECK(cudaGetDeviceProperties(&prop, device), "reading the device's properties");
    printf("device: %s sm_%d%d pci=%04x:%02x:%02x bytes=%zu repeats=%d\n", prop.name,
           prop.major, prop.minor, prop.pciDomainID, prop.pciBusID, prop.pciDeviceID, bytes,
           repeats);

    unsigned char *pinned = NULL, *pageable = (unsigned char *)malloc(bytes), *back = NULL;
    void *on_device = NULL, *other = NULL;
    if (!pageable) {
        fprintf(stderr, "%s: cannot allocate %zu bytes\n", me, bytes);
        return 2;
    }
    CHECK(cudaMallocHost((void **)&pinned, bytes), "allocating pinned memory");
    CHECK(cudaMallocHost((void **)&back, bytes), "allocating pinned memory");
    CHECK(cudaMalloc(&on_device, bytes), "allocating on the device");
    CHECK(cudaMalloc(&other, bytes), "allocating on the device");
    for (size_t i = 0; i < bytes; i++)
        pinned[i] = pageable[i] = (unsigned char)(i * 2654435761u >> 24);

    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start), "creating an event");
    CHECK(cudaEventCreate(&stop), "creating an event");
    measure("host to device, pinned", on_device, pinned, bytes, cudaMemcpyHostToDevice,
            repeats, start, stop);
    measure("device to host, pinned", back, on_device, bytes, cudaMemcpyDeviceToHost,
            repeats, start, stop);
    int pinned_ok = memcmp(back, pinned, bytes) == 0;
    measure("host to device, pageable", on_device, pageable, bytes, cudaMemcpyHostToDevice,
            repeats, start, stop);
    measure("device to host, pageable", pageable, on_device, bytes, cudaMemcpyDeviceToHost,
            repeats, start, stop);
    measure("device to device", other, on_device, bytes, cudaMemcpyDeviceToDevice, repeats,
            start, stop);
    CHECK(cudaMemcpy(back, other, bytes, cudaMemcpyDeviceToHost), "copying back");
    int ok = pinned_ok && memcmp(back, pinned, bytes) == 0 &&
             memcmp(pageable, pinned, bytes) == 0;
    printf("copies %s\n", ok ? "verified" : "WRONG");
    return ok ? 0 : 1;
}
