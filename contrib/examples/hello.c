/* A first Transit program in C: rank 0 sends a greeting to every other rank,
 * which prints it.  Build and run (with an installed Transit):
 *   cc hello.c $(pkg-config --cflags --libs transit) -o hello
 *   transit_run -n 3 ./hello */
#include <stdio.h>
#include <string.h>
#include <transit/transit.h>

int main(int argc, char** argv) {
    transit_context* ctx;
    if (transit_init(&argc, &argv, &ctx) != TRANSIT_SUCCESS) {
        fprintf(stderr, "hello: %s\n", transit_last_error());
        return 1;
    }
    const uint32_t me = transit_rank(ctx), size = transit_size(ctx), tag = 7;
    char text[64];
    int rc = TRANSIT_SUCCESS;
    if (me == 0) {
        snprintf(text, sizeof text, "hello from rank 0 of %u", (unsigned)size);
        for (uint32_t peer = 1; peer < size && rc >= 0; ++peer)
            rc = transit_send(ctx, peer, tag, text, strlen(text) + 1);
    } else {
        transit_status status;
        rc = transit_recv(ctx, 0, tag, text, sizeof text, &status);
        if (rc >= 0) printf("rank %u: %s\n", (unsigned)me, text);
    }
    if (rc < 0) fprintf(stderr, "hello: rank %u: %s\n", (unsigned)me, transit_last_error());
    transit_finalize(ctx);
    return rc < 0 ? 1 : 0;
}
