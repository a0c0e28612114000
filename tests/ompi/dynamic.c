/* Open MPI's dynamic processes over the adapter: a job spawns children, or two
 * separately started jobs meet through a port, and every process exchanges
 * messages of several sizes with every process of the other job, both ways,
 * checked byte by byte.  Roles (argv[1]):
 *   spawn N [R]  spawns N copies of itself as children ("child"), R times in
 *                turn (default 1): each round's children leave before the next
 *   accept FILE  opens a port, writes its name to FILE, accepts one connect
 *   connect FILE waits for FILE, connects to the port it names */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* 0 B, small, around Transit's eager limits, above them (rendezvous), 1 MiB. */
static const size_t sizes[] = {0, 1, 100, 4097, 70000, (size_t)1 << 20};
enum { nsizes = sizeof sizes / sizeof sizes[0] };

/* `first`: this side sends first to each remote rank, the other receives
 * first; `me` and `them` tell the patterns of the two sides apart. */
static int exchange(MPI_Comm inter, int first, int me, int them) {
    int rank, remote;
    MPI_Comm_rank(inter, &rank);
    MPI_Comm_remote_size(inter, &remote);
    unsigned char* buf = malloc(sizes[nsizes - 1]);
    CHECK(buf != NULL, "no memory");
    int checked = 0;
    for (int q = 0; q < remote; ++q) {
        for (int s = 0; s < nsizes; ++s) {
            const size_t n = sizes[s];
            /* Each (sender, receiver) pair has its own tag per size. */
            const int tag_out = s * 1000 + rank * 10 + q;
            const int tag_in = s * 1000 + q * 10 + rank;
            for (int turn = 0; turn < 2; ++turn) {
                if ((turn == 0) == (first != 0)) {
                    for (size_t i = 0; i < n; ++i) buf[i] = pattern(me * 16 + rank, tag_out, i);
                    MPI_OK(MPI_Send(buf, (int)n, MPI_BYTE, q, tag_out, inter));
                } else {
                    memset(buf, 0, n);
                    MPI_Status st;
                    MPI_OK(MPI_Recv(buf, (int)n, MPI_BYTE, q, tag_in, inter, &st));
                    int count;
                    MPI_Get_count(&st, MPI_BYTE, &count);
                    CHECK((size_t)count == n, "got %d bytes from remote %d, expected %zu", count, q,
                          n);
                    for (size_t i = 0; i < n; ++i)
                        CHECK(buf[i] == pattern(them * 16 + q, tag_in, i),
                              "size %zu byte %zu from remote rank %d", n, i, q);
                    ++checked;
                }
            }
        }
    }
    free(buf);
    return checked;
}

static void report(const char* role, MPI_Comm inter, int checked) {
    int rank, remote;
    MPI_Comm_rank(inter, &rank);
    MPI_Comm_remote_size(inter, &remote);
    int total = 0;
    MPI_OK(MPI_Reduce(&checked, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0)
        printf("dynamic %s: %d messages checked from %d remote rank(s), 0 B .. 1 MiB\n", role,
               total, remote);
}

static void write_port(const char* file, const char* port) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE* f = fopen(tmp, "w");
    CHECK(f != NULL, "cannot write %s", tmp);
    fprintf(f, "%s\n", port);
    CHECK(fclose(f) == 0, "cannot write %s", tmp);
    /* The other job reads a whole name or none. */
    CHECK(rename(tmp, file) == 0, "cannot rename %s", tmp);
}

static void read_port(const char* file, char* port) {
    FILE* f = NULL;
    for (int tries = 0; f == NULL && tries < 1200; ++tries) {
        f = fopen(file, "r");
        if (f == NULL) usleep(100000);
    }
    CHECK(f != NULL, "no port name in %s after 120 s", file);
    CHECK(fgets(port, MPI_MAX_PORT_NAME, f) != NULL, "empty %s", file);
    fclose(f);
    port[strcspn(port, "\n")] = '\0';
}

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    CHECK(argc >= 2, "usage: dynamic spawn N | child | accept FILE | connect FILE");
    const char* role = argv[1];
    MPI_Comm inter;
    int checked;
    if (strcmp(role, "spawn") == 0) {
        CHECK(argc >= 3, "spawn needs a count");
        char* child_argv[] = {"child", NULL};
        int errs[16];
        const int n = atoi(argv[2]);
        CHECK(n > 0 && n <= 16, "1..16 children");
        const int rounds = argc >= 4 ? atoi(argv[3]) : 1;
        CHECK(rounds > 0, "1 or more rounds");
        for (int r = 0;; ++r) {
            MPI_OK(MPI_Comm_spawn(argv[0], child_argv, n, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                                  errs));
            for (int i = 0; i < n; ++i) CHECK(errs[i] == MPI_SUCCESS, "child %d not started", i);
            checked = exchange(inter, 1, 0, 1);
            if (r + 1 == rounds) break;
            report(role, inter, checked);
            MPI_OK(MPI_Comm_disconnect(&inter));
        }
    } else if (strcmp(role, "child") == 0) {
        MPI_OK(MPI_Comm_get_parent(&inter));
        CHECK(inter != MPI_COMM_NULL, "no parent");
        checked = exchange(inter, 0, 1, 0);
    } else if (strcmp(role, "accept") == 0 && argc >= 3) {
        char port[MPI_MAX_PORT_NAME];
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0) {
            MPI_OK(MPI_Open_port(MPI_INFO_NULL, port));
            write_port(argv[2], port);
        }
        MPI_OK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
        checked = exchange(inter, 1, 0, 1);
        if (rank == 0) MPI_OK(MPI_Close_port(port));
    } else if (strcmp(role, "connect") == 0 && argc >= 3) {
        char port[MPI_MAX_PORT_NAME] = "";
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0) read_port(argv[2], port);
        MPI_OK(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
        checked = exchange(inter, 0, 1, 0);
    } else {
        CHECK(0, "unknown role %s", role);
        return 1;
    }
    report(role, inter, checked);
    MPI_OK(MPI_Comm_disconnect(&inter));
    MPI_OK(MPI_Finalize());
    return 0;
}
