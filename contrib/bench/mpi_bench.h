/* What the MPI side programs of contrib/bench share: reading their settings
 * from the environment and the median of a set of trials. */
#ifndef TRANSIT_CONTRIB_BENCH_MPI_BENCH_H
#define TRANSIT_CONTRIB_BENCH_MPI_BENCH_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* The environment variable `name` as a number in lo..hi, or `fallback` when
 * unset; anything else stops the job, naming `program`. */
static int env_int(const char* program, const char* name, int fallback, int lo, int hi) {
    const char* v = getenv(name);
    if (v == NULL || *v == '\0') return fallback;
    char* end = NULL;
    long n = strtol(v, &end, 10);
    if (*end != '\0' || n < lo || n > hi) {
        fprintf(stderr, "%s: %s=%s is not a number in %d..%d\n", program, name, v, lo, hi);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return (int)n;
}

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

/* Sorts v. */
static double median(double* v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
