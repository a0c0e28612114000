/* Every C function that can fail says why: after each failing call below,
 * transit_last_error() is the reason of that call (it names the call or the
 * cause), not the one before and not "".  A singleton with btl=self, so no
 * rank but 0 exists and no transport carries peers outside the job.  Exits
 * non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transit/transit.h"

static int failures = 0;

/* rc must be an error and transit_last_error() must contain every one of the
 * `words` (a "|"-separated list of alternatives in each). */
static void expect(int line, const char* call, int rc, const char* words) {
    const char* why = transit_last_error();
    if (rc >= 0) {
        printf("line %d: %s: returned %d, expected an error\n", line, call, rc);
        ++failures;
        return;
    }
    char alternatives[256];
    snprintf(alternatives, sizeof alternatives, "%s", words);
    int found = 0;
    for (char* w = strtok(alternatives, "|"); w != NULL; w = strtok(NULL, "|"))
        if (strstr(why, w) != NULL) found = 1;
    printf("%s: %s: %s\n", call, transit_status_string(rc), why);
    if (!found) {
        printf("line %d: %s: returned %s, transit_last_error() \"%s\" names none of \"%s\"\n", line,
               call, transit_status_string(rc), why, words);
        ++failures;
    }
}
#define EXPECT(call, words) expect(__LINE__, #call, (call), words)

static transit_am_destination discard(transit_context* ctx, uint32_t source, uint32_t handler,
                                      const void* header, size_t header_length, size_t data_length,
                                      void* arg) {
    (void)ctx, (void)source, (void)handler, (void)header, (void)header_length, (void)data_length,
        (void)arg;
    transit_am_destination d = {NULL, NULL, NULL};
    return d;
}

int main(void) {
    setenv("TRANSIT_MCA_btl", "self", 1);
    transit_context* ctx = NULL;
    int provided = 0;
    EXPECT(transit_init_thread(NULL, NULL, 7, &provided, &ctx), "thread level");
    /* A bad value on the command line, then a good one (the later --mca wins). */
    char prog[] = "capi_last_error", mca[] = "--mca", name[] = "pml_base_thread_level";
    char bad[] = "sometimes", good[] = "single";
    char* bad_argv[] = {prog, mca, name, bad, NULL};
    char* good_argv[] = {prog, mca, name, good, NULL};
    int argc = 4;
    char** argv = bad_argv;
    EXPECT(transit_init(&argc, &argv, &ctx), "sometimes");
    argc = 4;
    argv = good_argv;
    if (transit_init(&argc, &argv, &ctx) != TRANSIT_SUCCESS) {
        printf("transit_init failed: %s\n", transit_last_error());
        return 1;
    }

    const uint32_t nobody = 5; /* the job has rank 0 only */
    char buf[64] = "hello";
    struct iovec iov = {buf, sizeof buf};
    transit_request* req = NULL;
    transit_status st;
    int flag = 0;
    size_t index = 0;

    /* Tagged messages. */
    EXPECT(transit_send(ctx, nobody, 1, buf, 8), "send (peer 5");
    EXPECT(transit_isend(ctx, nobody, 1, buf, 8, NULL, &req), "isend (peer 5");
    EXPECT(transit_isendv(ctx, nobody, 1, &iov, 1, NULL, &req), "isendv (peer 5");
    EXPECT(transit_irecv(ctx, nobody, 1, buf, 8, NULL, &req), "irecv (peer 5");
    EXPECT(transit_irecvv(ctx, nobody, 1, &iov, 1, NULL, &req), "irecvv (peer 5");
    EXPECT(transit_recv(ctx, nobody, 1, buf, 8, &st), "recv (peer 5");
    EXPECT(transit_probe(ctx, nobody, 1, &st), "probe (peer 5");
    EXPECT(transit_iprobe(ctx, nobody, 1, &flag, &st), "iprobe (peer 5");
    req = NULL;
    EXPECT(transit_test(ctx, &req, &flag, &st), "test:");
    EXPECT(transit_wait(ctx, &req, &st), "wait:");
    EXPECT(transit_cancel(ctx, NULL), "cancel:");
    transit_request* none[2] = {NULL, NULL};
    EXPECT(transit_wait_any(ctx, none, 2, &index, &st), "wait_any");

    /* A receive that ends in error: 8 bytes into a 4-byte buffer. */
    char small[4];
    transit_request* reqs[2] = {NULL, NULL};
    if (transit_irecv(ctx, 0, 2, small, sizeof small, NULL, &reqs[0]) < 0 ||
        transit_isend(ctx, 0, 2, buf, 8, NULL, &reqs[1]) < 0) {
        printf("self send failed: %s\n", transit_last_error());
        return 1;
    }
    transit_status sts[2];
    EXPECT(transit_wait_all(ctx, reqs, 2, sts), "truncated");
    if (transit_irecv(ctx, 0, 3, small, sizeof small, NULL, &req) < 0 ||
        transit_send(ctx, 0, 3, buf, 8) < 0) {
        printf("self send failed: %s\n", transit_last_error());
        return 1;
    }
    EXPECT(transit_wait(ctx, &req, &st), "truncated");

    /* Counters and active messages. */
    EXPECT(transit_counter_ref_release(ctx, 12345), "release_counter_ref");
    EXPECT(transit_register_am_handler(ctx, 100000, discard, NULL, NULL), "handler id");
    EXPECT(transit_register_am_handler(ctx, 3, NULL, NULL, NULL), "header handler");
    if (transit_register_am_handler(ctx, 3, discard, NULL, NULL) != TRANSIT_SUCCESS) {
        printf("transit_register_am_handler failed: %s\n", transit_last_error());
        return 1;
    }
    EXPECT(transit_register_am_handler(ctx, 3, discard, NULL, NULL), "taken");
    EXPECT(transit_am_send(ctx, nobody, 3, NULL, 0, buf, 8, NULL, 0, NULL), "am_send (peer 5");

    /* One-sided. */
    transit_memory_region* region = NULL;
    EXPECT(transit_register_memory_scoped(ctx, buf, sizeof buf, (enum transit_region_scope)9, NULL,
                                          0, &region),
           "scope");
    EXPECT(
        transit_register_memory_scoped(ctx, buf, sizeof buf, TRANSIT_SCOPE_PEERS, NULL, 2, &region),
        "null list");
    if (transit_register_memory(ctx, buf, sizeof buf, &region) != TRANSIT_SUCCESS) {
        printf("transit_register_memory failed: %s\n", transit_last_error());
        return 1;
    }
    size_t length = 0;
    char packed[1];
    EXPECT(transit_pack_key(ctx, region, packed, sizeof packed, &length), "bytes");
    transit_remote_key* key = NULL;
    EXPECT(transit_unpack_key(ctx, "garbage", 7, &key), "unpack_key");
    uint64_t fetched = 0;
    EXPECT(transit_put(ctx, nobody, buf, 8, NULL, 0), "put (peer 5");
    EXPECT(transit_get(ctx, nobody, buf, 8, NULL, 0), "get (peer 5");
    EXPECT(transit_atomic(ctx, 0, (transit_atomic_op)42, TRANSIT_ATOMIC_64, NULL, 0, 1, &fetched),
           "transit_atomic_op");
    EXPECT(transit_atomic(ctx, nobody, TRANSIT_ATOMIC_ADD, TRANSIT_ATOMIC_64, NULL, 0, 1, &fetched),
           "atomic (peer 5");
    EXPECT(transit_cswap(ctx, nobody, TRANSIT_ATOMIC_64, NULL, 0, 1, 2, NULL), "cswap (peer 5");
    EXPECT(transit_flush(ctx, nobody), "flush (peer 5");
    EXPECT(transit_deregister_memory(ctx, &(transit_memory_region*){NULL}), "deregister_memory");
    if (transit_deregister_memory(ctx, &region) != TRANSIT_SUCCESS) {
        printf("transit_deregister_memory failed: %s\n", transit_last_error());
        return 1;
    }

    /* Peers outside the job and names: btl=self carries none, so a
     * singleton cannot publish its address (its names are in this user's
     * name directory on the node). */
    char address[512];
    size_t needed = 0;
    uint32_t peer = 0;
    EXPECT(transit_listen(ctx, address, sizeof address, &needed), "no selected transport");
    EXPECT(transit_connect(ctx, "transit:1;garbage", &peer), "not a Transit address");
    EXPECT(transit_connect(ctx, NULL, &peer), "null");
    EXPECT(transit_disconnect(ctx, 0), "disconnect (rank 0)");
    EXPECT(transit_disconnect_abortive(ctx, 0), "disconnect (rank 0)");
    EXPECT(transit_publish(ctx, "capi_last_error"), "publish: listen: no selected transport");
    EXPECT(transit_lookup(ctx, "capi_last_error", 0, address, sizeof address, &needed),
           "no process published the name");
    EXPECT(transit_unpublish(ctx, "capi_last_error"), "is not published");

    transit_finalize(ctx);
    if (failures) printf("%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
