/* MPI_Alltoall and MPI_Alltoallv with every block checked. */
#include <stdlib.h>

#include "check.h"

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int blocks[] = {1, 1000, 70000};
    for (int b = 0; b < 3; ++b) {
        const int n = blocks[b];
        unsigned char* out = malloc((size_t)n * size);
        unsigned char* in = malloc((size_t)n * size);
        CHECK(out && in, "no memory");
        for (int dst = 0; dst < size; ++dst)
            for (int i = 0; i < n; ++i) out[(size_t)dst * n + i] = pattern(rank, dst, (size_t)i);
        MPI_OK(MPI_Alltoall(out, n, MPI_BYTE, in, n, MPI_BYTE, MPI_COMM_WORLD));
        for (int src = 0; src < size; ++src)
            for (int i = 0; i < n; ++i)
                CHECK(in[(size_t)src * n + i] == pattern(src, rank, (size_t)i),
                      "block %d from %d byte %d", n, src, i);
        free(out);
        free(in);
    }
    /* Alltoallv: rank r sends (r + 1) * (dst + 1) ints to dst. */
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
    int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
    int stotal = 0, rtotal = 0;
    for (int p = 0; p < size; ++p) {
        sc[p] = (rank + 1) * (p + 1);
        sd[p] = stotal;
        stotal += sc[p];
        rc[p] = (p + 1) * (rank + 1);
        rd[p] = rtotal;
        rtotal += rc[p];
    }
    int* sbuf = malloc(sizeof(int) * stotal);
    int* rbuf = malloc(sizeof(int) * rtotal);
    for (int p = 0; p < size; ++p)
        for (int i = 0; i < sc[p]; ++i) sbuf[sd[p] + i] = rank * 1000000 + p * 1000 + i;
    MPI_OK(MPI_Alltoallv(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, MPI_COMM_WORLD));
    for (int p = 0; p < size; ++p)
        for (int i = 0; i < rc[p]; ++i)
            CHECK(rbuf[rd[p] + i] == p * 1000000 + rank * 1000 + i, "alltoallv from %d item %d", p,
                  i);
    if (rank == 0) printf("alltoall: %d ranks checked\n", size);
    free(sc), free(sd), free(rc), free(rd), free(sbuf), free(rbuf);
    MPI_OK(MPI_Finalize());
    return 0;
}
