/* The C API from a C11 program: tagged messages, probe, cancel, active
 * messages with counters, one-sided operations and barriers, with data checked.
 * Run under transit_run with any number of ranks; exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L /* getppid */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "transit/transit.h"

static int failures = 0;
static uint32_t me = 0;

#define CHECK(cond)                                                                               \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "rank %u: %s:%d: check failed: %s\n", me, __FILE__, __LINE__, #cond); \
            ++failures;                                                                           \
        }                                                                                         \
    } while (0)

static int peer_events[3];
static uint32_t joined_peer = TRANSIT_ANY_RANK;

static void on_peer_event(transit_context* ctx, uint32_t peer, transit_peer_event_kind kind,
                          void* user) {
    (void)ctx, (void)user;
    ++peer_events[kind];
    if (kind == TRANSIT_PEER_EVENT_JOINED) joined_peer = peer;
}

/* The context connects to its own address: it is then its own client (one
 * id) and server (another); the events say the client joined, then that both
 * departed once the client side disconnects. */
static void connect_to_self(transit_context* ctx, const char* address) {
    transit_on_peer_event(ctx, on_peer_event, NULL);
    uint32_t server = 0;
    CHECK(transit_connect(ctx, address, &server) == TRANSIT_SUCCESS);
    const uint32_t tag = 0x7e57;
    int v = 5, got = 0;
    CHECK(transit_send(ctx, server, tag, &v, sizeof v) == TRANSIT_SUCCESS);
    transit_status st;
    CHECK(transit_recv(ctx, TRANSIT_ANY_RANK, tag, &got, sizeof got, &st) == TRANSIT_SUCCESS);
    CHECK(got == 5 && st.source != server && st.source >= transit_size(ctx));
    for (long i = 0; i < 100000000 && peer_events[TRANSIT_PEER_EVENT_JOINED] == 0; ++i)
        transit_progress(ctx);
    CHECK(peer_events[TRANSIT_PEER_EVENT_JOINED] == 1 && joined_peer == st.source);
    CHECK(transit_disconnect(ctx, server) == TRANSIT_SUCCESS);
    for (long i = 0; i < 100000000 && peer_events[TRANSIT_PEER_EVENT_DEPARTED] < 2; ++i)
        transit_progress(ctx);
    CHECK(peer_events[TRANSIT_PEER_EVENT_DEPARTED] == 2 &&
          peer_events[TRANSIT_PEER_EVENT_FAILED] == 0);
    CHECK(transit_send(ctx, server, tag, &v, sizeof v) == TRANSIT_PEER_DEPARTED);
    transit_on_peer_event(ctx, NULL, NULL);
}

/* Names under the launcher: rank 0 publishes its address under a name of
 * this job (transit_run's pid: other jobs of the node see the names too), the
 * others look it up and connect.  Without a transport for peers outside the
 * job (btl=self) there is no address to publish. */
static void names(transit_context* ctx, uint32_t n) {
    char name[64], other[64];
    snprintf(name, sizeof name, "capi-%ld", (long)getppid());
    snprintf(other, sizeof other, "capi-%ld-unknown", (long)getppid());
    CHECK(transit_publish(ctx, NULL) == TRANSIT_BAD_PARAM);
    int published = 0;
    if (me == 0) {
        const int rc = transit_publish(ctx, name);
        CHECK(rc == TRANSIT_SUCCESS || (rc == TRANSIT_NOT_SUPPORTED && n == 1));
        published = rc == TRANSIT_SUCCESS;
        if (published) CHECK(transit_publish(ctx, name) == TRANSIT_EXISTS);
    }
    CHECK(transit_barrier(ctx) == TRANSIT_SUCCESS);
    if (me != 0) {
        char small[4];
        size_t needed = 0;
        CHECK(transit_lookup(ctx, name, 5000, small, sizeof small, &needed) == TRANSIT_TRUNCATED);
        char* address = malloc(needed);
        CHECK(address != NULL);
        CHECK(transit_lookup(ctx, name, 0, address, needed, NULL) == TRANSIT_SUCCESS);
        CHECK(strncmp(address, "transit:1;token=", 16) == 0);
        uint32_t server = 0;
        CHECK(transit_connect(ctx, address, &server) == TRANSIT_SUCCESS);
        CHECK(transit_disconnect(ctx, server) == TRANSIT_SUCCESS);
        free(address);
        CHECK(transit_unpublish(ctx, name) == TRANSIT_ACCESS_DENIED);
        CHECK(transit_lookup(ctx, other, 0, small, sizeof small, NULL) == TRANSIT_NOT_FOUND);
    }
    CHECK(transit_barrier(ctx) == TRANSIT_SUCCESS);
    if (published) {
        CHECK(transit_unpublish(ctx, name) == TRANSIT_SUCCESS);
        CHECK(transit_unpublish(ctx, name) == TRANSIT_NOT_FOUND);
    }
    CHECK(transit_barrier(ctx) == TRANSIT_SUCCESS);
    if (me != 0) {
        char buf[1024];
        CHECK(transit_lookup(ctx, name, 0, buf, sizeof buf, NULL) == TRANSIT_NOT_FOUND);
    }
}

static char landing[4096];
static int am_completions = 0;

static transit_am_destination header_handler(transit_context* ctx, uint32_t source,
                                             uint32_t handler, const void* header,
                                             size_t header_length, size_t data_length, void* arg) {
    (void)ctx, (void)source, (void)handler, (void)data_length, (void)arg;
    uint32_t offset = 0;
    if (header_length == sizeof offset) memcpy(&offset, header, sizeof offset);
    transit_am_destination d = {landing + offset, NULL, &am_completions};
    return d;
}

static void completion_handler(transit_context* ctx, uint32_t source, void* buffer, size_t length,
                               void* user) {
    (void)ctx, (void)source, (void)buffer, (void)length;
    ++*(int*)user;
}

int main(int argc, char** argv) {
    transit_context* ctx = NULL;
    int rc = transit_init(&argc, &argv, &ctx);
    if (rc != TRANSIT_SUCCESS) {
        fprintf(stderr, "transit_init: %s\n", transit_status_string(rc));
        return 1;
    }
    me = transit_rank(ctx);
    const uint32_t n = transit_size(ctx);
    const uint32_t next = (me + 1) % n, prev = (me + n - 1) % n;

    /* Tagged ring, eager and rendezvous sizes. */
    size_t sizes[] = {0, 5, 5000, 300000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
        size_t len = sizes[k];
        unsigned char* out = malloc(len + 1);
        unsigned char* in = malloc(len + 1);
        for (size_t i = 0; i < len; ++i) out[i] = (unsigned char)(i * 3 + me);
        transit_request *r = NULL, *s = NULL;
        int marker = 1;
        CHECK(transit_irecv(ctx, prev, 7, in, len, &marker, &r) >= 0);
        CHECK(transit_request_user(r) == &marker);
        CHECK(transit_isend(ctx, next, 7, out, len, NULL, &s) >= 0);
        transit_status st;
        CHECK(transit_wait(ctx, &s, NULL) == TRANSIT_SUCCESS);
        CHECK(transit_wait(ctx, &r, &st) == TRANSIT_SUCCESS);
        CHECK(st.source == prev && st.tag == 7 && st.length == len);
        for (size_t i = 0; i < len; ++i)
            if (in[i] != (unsigned char)(i * 3 + prev)) {
                CHECK(!"data intact");
                break;
            }
        free(out);
        free(in);
    }

    /* Probe, then a truncated receive, then cancel. */
    char msg[100];
    memset(msg, 'x', sizeof msg);
    CHECK(transit_send(ctx, me, 8, msg, sizeof msg) == TRANSIT_SUCCESS);
    transit_status st;
    CHECK(transit_probe(ctx, TRANSIT_ANY_RANK, TRANSIT_ANY_TAG, &st) == TRANSIT_SUCCESS);
    CHECK(st.source == me && st.tag == 8 && st.length == sizeof msg);
    char small[10];
    CHECK(transit_recv(ctx, me, 8, small, sizeof small, &st) == TRANSIT_TRUNCATED);
    CHECK(st.length == sizeof small && st.sent_length == sizeof msg);
    transit_request* c = NULL;
    CHECK(transit_irecv(ctx, me, 9, small, sizeof small, NULL, &c) == TRANSIT_SUCCESS);
    CHECK(transit_cancel(ctx, c) == TRANSIT_SUCCESS);
    CHECK(transit_wait(ctx, &c, NULL) == TRANSIT_CANCELLED);

    /* Peers outside the job: an address when a selected transport carries them
     * (tcp), else an error; a job rank is no peer to disconnect. */
    {
        char small[4];
        size_t needed = 0;
        const int rc = transit_listen(ctx, small, sizeof small, &needed);
        if (rc == TRANSIT_TRUNCATED) {
            char* address = malloc(needed);
            CHECK(address != NULL);
            CHECK(transit_listen(ctx, address, needed, NULL) == TRANSIT_SUCCESS);
            CHECK(strncmp(address, "transit:1;token=", 16) == 0);
            CHECK(strlen(address) + 1 == needed);
            connect_to_self(ctx, address);
            free(address);
        } else {
            CHECK(rc == TRANSIT_ERROR);
        }
        uint32_t peer = 0;
        CHECK(transit_connect(ctx, "transit:1;token=00", &peer) == TRANSIT_BAD_PARAM);
        CHECK(transit_disconnect(ctx, 0) == TRANSIT_BAD_PARAM);
    }

    names(ctx, n);

    /* Active messages: data lands at the offset named in the header. */
    CHECK(transit_register_am_handler(ctx, 1, header_handler, completion_handler, NULL) ==
          TRANSIT_SUCCESS);
    transit_counter* origin = transit_counter_create();
    transit_counter* done = transit_counter_create();
    CHECK(transit_barrier(ctx) == TRANSIT_SUCCESS);
    uint32_t offset = 100;
    const char text[] = "hello from C";
    CHECK(transit_am_send(ctx, next, 1, &offset, sizeof offset, text, sizeof text, origin, 0,
                          done) >= 0);
    CHECK(transit_counter_wait(ctx, origin, 1) == TRANSIT_SUCCESS);
    CHECK(transit_counter_wait(ctx, done, 1) == TRANSIT_SUCCESS);
    CHECK(transit_counter_get(ctx, done) == 1);
    CHECK(transit_counter_lost(ctx, done) == 0);
    CHECK(transit_barrier(ctx) == TRANSIT_SUCCESS);
    CHECK(am_completions == 1);
    CHECK(strcmp(landing + offset, text) == 0);
    /* A counter whose ref went out is released before it is destroyed. */
    transit_counter_ref ref = transit_counter_ref_of(ctx, done);
    CHECK(ref != 0);
    CHECK(transit_counter_ref_release(ctx, ref) == TRANSIT_SUCCESS);
    CHECK(transit_counter_ref_release(ctx, ref) == TRANSIT_BAD_PARAM);
    CHECK(transit_counter_ref_of(ctx, done) != ref);
    transit_counter_destroy(origin);
    transit_counter_destroy(done);

    /* One-sided: everyone adds to rank 0's counter, then reads it. */
    uint64_t* window = transit_mem_alloc(ctx, 64);
    memset(window, 0, 64);
    transit_memory_region* region = NULL;
    CHECK(transit_register_memory(ctx, window, 64, &region) == TRANSIT_SUCCESS);
    unsigned char packed[1024];
    size_t packed_len = 0;
    CHECK(transit_pack_key(ctx, region, packed, sizeof packed, &packed_len) == TRANSIT_SUCCESS);
    /* Rank 0's key goes to everyone. */
    if (me == 0)
        for (uint32_t r = 1; r < n; ++r) transit_send(ctx, r, 11, packed, packed_len);
    else {
        CHECK(transit_recv(ctx, 0, 11, packed, sizeof packed, &st) == TRANSIT_SUCCESS);
        packed_len = st.length;
    }
    transit_remote_key* key = NULL;
    CHECK(transit_unpack_key(ctx, packed, packed_len, &key) == TRANSIT_SUCCESS);
    CHECK(transit_atomic(ctx, 0, TRANSIT_ATOMIC_ADD, TRANSIT_ATOMIC_64, key, 0, me + 1, NULL) ==
          TRANSIT_SUCCESS);
    uint64_t value = 0xabcdef;
    CHECK(transit_put(ctx, 0, &value, sizeof value, key, 8 + 8 * (me % 6)) == TRANSIT_SUCCESS);
    CHECK(transit_fence(ctx) == TRANSIT_SUCCESS);
    uint64_t total = 0, got = 0, old = 0;
    CHECK(transit_get(ctx, 0, &total, sizeof total, key, 0) == TRANSIT_SUCCESS);
    CHECK(transit_get(ctx, 0, &got, sizeof got, key, 8 + 8 * (me % 6)) == TRANSIT_SUCCESS);
    CHECK(transit_flush(ctx, 0) == TRANSIT_SUCCESS);
    CHECK(total == (uint64_t)n * (n + 1) / 2);
    CHECK(got == 0xabcdef);
    CHECK(transit_barrier(ctx) == TRANSIT_SUCCESS);
    CHECK(transit_cswap(ctx, 0, TRANSIT_ATOMIC_64, key, 0, total, 1, &old) == TRANSIT_SUCCESS);
    CHECK(transit_flush_all(ctx) == TRANSIT_SUCCESS);
    CHECK(transit_barrier(ctx) == TRANSIT_SUCCESS);
    if (me == 0) CHECK(window[0] == 1);
    transit_release_key(ctx, &key);
    CHECK(transit_deregister_memory(ctx, &region) == TRANSIT_SUCCESS);
    transit_mem_free(ctx, window);

    CHECK(transit_finalize(ctx) == TRANSIT_SUCCESS);
    if (failures == 0 && me == 0) printf("capi: all checks passed on %u rank(s)\n", n);
    return failures ? 1 : 0;
}
