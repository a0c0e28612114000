/* A non-contiguous derived datatype (every other column of a matrix, as a
 * vector of strided blocks) sent small and large: the adapter packs it with
 * Open MPI's convertor. */
#include <stdlib.h>

#include "check.h"

static void run(int rank, int rows) {
    const int cols = 8;
    MPI_Datatype column_pairs;
    /* rows blocks of 2 doubles, stride one row: columns 0 and 1 of the matrix */
    MPI_OK(MPI_Type_vector(rows, 2, cols, MPI_DOUBLE, &column_pairs));
    MPI_OK(MPI_Type_commit(&column_pairs));
    double* m = calloc((size_t)rows * cols, sizeof(double));
    CHECK(m != NULL, "no memory");
    if (rank == 0) {
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) m[(size_t)r * cols + c] = r * 10.0 + c;
        MPI_OK(MPI_Send(m, 1, column_pairs, 1, rows, MPI_COMM_WORLD));
        /* And receive it back into a contiguous array. */
        double* flat = malloc(sizeof(double) * 2 * (size_t)rows);
        MPI_OK(MPI_Recv(flat, 2 * rows, MPI_DOUBLE, 1, rows, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int r = 0; r < rows; ++r)
            CHECK(flat[2 * r] == r * 10.0 && flat[2 * r + 1] == r * 10.0 + 1, "row %d back", r);
        free(flat);
    } else if (rank == 1) {
        MPI_OK(MPI_Recv(m, 1, column_pairs, 0, rows, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) {
                const double expect = c < 2 ? r * 10.0 + c : 0.0;
                CHECK(m[(size_t)r * cols + c] == expect, "rows %d: [%d][%d] = %g, expected %g",
                      rows, r, c, m[(size_t)r * cols + c], expect);
            }
        MPI_OK(MPI_Send(m, 1, column_pairs, 0, rows, MPI_COMM_WORLD));
    }
    free(m);
    MPI_Type_free(&column_pairs);
}

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int rows[] = {1, 3, 100, 5000, 200000};
    for (int i = 0; i < 5; ++i) run(rank, rows[i]);
    if (rank == 0) printf("datatype: strided vectors up to %d rows checked\n", rows[4]);
    MPI_OK(MPI_Finalize());
    return 0;
}
