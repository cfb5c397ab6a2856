/* mpi-startup: how long an MPI takes to start N ranks (Oakforest-PACS: the cost of MPI_Init
 * and of a complete "Hello World" at scale).
 *
 * usage: mpi-startup LAUNCH_NS
 * LAUNCH_NS is when the job script started the launcher (nanoseconds since the epoch,
 * `date +%s%N`), so that launch-to-init includes starting the processes; across nodes this
 * assumes their clocks agree (NTP), as any such measurement does.
 *
 * Every rank times its MPI_Init and prints one hello line; rank 0 then prints one summary:
 *   hello from rank R of N on HOST
 *   mpi-startup: ranks=N hosts=H init_max_s=... init_mean_s=... launch_to_init_max_s=...
 * The job script times the whole launch (the hello world) around the launcher.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int by_name(const void *a, const void *b)
{
    return strncmp(a, b, MPI_MAX_PROCESSOR_NAME);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    double entered = now();
    MPI_Init(&argc, &argv);
    double initialised = now();

    int rank, size, length;
    char host[MPI_MAX_PROCESSOR_NAME] = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &length);
    if (argc != 2 || atoll(argv[1]) <= 0) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi-startup LAUNCH_NS (from date +%%s%%N)\n");
        MPI_Finalize();
        return 2;
    }
    double launched = atoll(argv[1]) * 1e-9;

    printf("hello from rank %d of %d on %s\n", rank, size, host);
    fflush(stdout);

    /* Distinct hosts: the hosts of all ranks, gathered on rank 0. */
    char *hosts = rank == 0 ? calloc((size_t)size, MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME,
               MPI_CHAR, 0, MPI_COMM_WORLD);

    double init = initialised - entered, since_launch = initialised - launched;
    double init_max, init_sum, since_launch_max;
    MPI_Reduce(&init, &init_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&init, &init_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&since_launch, &since_launch_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        /* Sorted, so that counting distinct names stays cheap at 100k ranks. */
        qsort(hosts, (size_t)size, MPI_MAX_PROCESSOR_NAME, by_name);
        int distinct = 1;
        for (int i = 1; i < size; i++)
            distinct += by_name(hosts + (size_t)(i - 1) * MPI_MAX_PROCESSOR_NAME,
                                hosts + (size_t)i * MPI_MAX_PROCESSOR_NAME) != 0;
        printf("mpi-startup: ranks=%d hosts=%d init_max_s=%.6f init_mean_s=%.6f "
               "launch_to_init_max_s=%.6f\n", size, distinct, init_max, init_sum / size,
               since_launch_max);
        fflush(stdout);
        free(hosts);
    }
    MPI_Finalize();
    return 0;
}
