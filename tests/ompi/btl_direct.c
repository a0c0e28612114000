/* The adapter's one-sided operations called the way Open MPI's one-sided
 * layer calls them: after MPI_Init, take the transit module Open MPI's bml
 * chose for the peer and run put, get, atomic op, fetch-op and compare-swap
 * (64- and 32-bit) on the peer's registered memory, waiting for every
 * completion callback and checking both sides.  (Open MPI 4.1's osc/rdma
 * cannot pick the adapter: it needs one btl that also reaches the caller.) */
#include "ompi_config.h"

#include <stdint.h>
#include <string.h>

#include "check.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/bml/base/base.h"
#include "ompi/mca/bml/bml.h"
#include "opal/runtime/opal_progress.h"

enum { slots = 16, handle_max = MCA_BTL_REG_HANDLE_MAX_SIZE };

struct peer_info {
    uint64_t address;
    unsigned char handle[handle_max];
};

static volatile int pending;
static int last_status;

static void done(mca_btl_base_module_t* btl, struct mca_btl_base_endpoint_t* ep, void* local,
                 mca_btl_base_registration_handle_t* lh, void* context, void* cbdata, int status) {
    (void)btl, (void)ep, (void)local, (void)lh, (void)context, (void)cbdata;
    last_status = status;
    --pending;
}

/* Starts one operation (retrying while the btl is out of resources) and
 * waits for its callback. */
#define RUN(call)                                                                       \
    do {                                                                                \
        pending = 1;                                                                    \
        int rc_;                                                                        \
        while ((rc_ = (call)) == OPAL_ERR_OUT_OF_RESOURCE) opal_progress();             \
        CHECK(rc_ == OPAL_SUCCESS, "%s returned %d", #call, rc_);                       \
        while (pending) opal_progress();                                                \
        CHECK(last_status == OPAL_SUCCESS, "%s completed with %d", #call, last_status); \
    } while (0)

static mca_bml_base_btl_t* transit_btl(int peer) {
    ompi_proc_t* proc = ompi_comm_peer_lookup(&ompi_mpi_comm_world.comm, peer);
    mca_bml_base_endpoint_t* ep = mca_bml_base_get_endpoint(proc);
    CHECK(ep != NULL, "no bml endpoint for rank %d", peer);
    mca_bml_base_btl_array_t* lists[] = {&ep->btl_rdma, &ep->btl_send};
    for (int l = 0; l < 2; ++l)
        for (size_t i = 0; i < mca_bml_base_btl_array_get_size(lists[l]); ++i) {
            mca_bml_base_btl_t* b = mca_bml_base_btl_array_get_index(lists[l], i);
            if (strcmp(b->btl->btl_component->btl_version.mca_component_name, "transit") == 0)
                return b;
        }
    return NULL;
}

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "runs with 2 ranks");
    const int peer = 1 - rank;
    /* One message first, so the peer is fully connected. */
    MPI_OK(MPI_Sendrecv(&rank, 1, MPI_INT, peer, 0, &size, 1, MPI_INT, peer, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    mca_bml_base_btl_t* b = transit_btl(peer);
    CHECK(b != NULL, "Open MPI uses no transit module for rank %d", peer);
    mca_btl_base_module_t* btl = b->btl;
    struct mca_btl_base_endpoint_t* ep = b->btl_endpoint;
    const uint32_t need = MCA_BTL_FLAGS_PUT | MCA_BTL_FLAGS_GET | MCA_BTL_FLAGS_ATOMIC_OPS |
                          MCA_BTL_FLAGS_ATOMIC_FOPS;
    CHECK((btl->btl_flags & need) == need, "module flags %#x lack put/get/atomics", btl->btl_flags);

    static int64_t exposed[slots], local[slots];
    memset(exposed, 0, sizeof exposed);
    mca_btl_base_registration_handle_t *mine = NULL, *local_handle = NULL;
    struct peer_info me = {(uint64_t)(uintptr_t)exposed, {0}}, them;
    if (btl->btl_register_mem != NULL) {
        mine = btl->btl_register_mem(btl, MCA_BTL_ENDPOINT_ANY, exposed, sizeof exposed,
                                     MCA_BTL_REG_FLAG_ACCESS_ANY);
        local_handle = btl->btl_register_mem(btl, MCA_BTL_ENDPOINT_ANY, local, sizeof local,
                                             MCA_BTL_REG_FLAG_ACCESS_ANY);
        CHECK(mine != NULL && local_handle != NULL, "registration failed");
        memcpy(me.handle, mine, btl->btl_registration_handle_size);
    }
    MPI_OK(MPI_Sendrecv(&me, sizeof me, MPI_BYTE, peer, 1, &them, sizeof them, MPI_BYTE, peer, 1,
                        MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    mca_btl_base_registration_handle_t* remote =
        btl->btl_register_mem != NULL ? (mca_btl_base_registration_handle_t*)them.handle : NULL;
    const uint64_t base = them.address;

    /* put slots 0..7, get them back */
    for (int i = 0; i < 8; ++i) local[i] = rank * 1000 + i;
    RUN(btl->btl_put(btl, ep, local, base, local_handle, remote, 8 * sizeof(int64_t), 0,
                     MCA_BTL_NO_ORDER, done, NULL, NULL));
    memset(local, 0, sizeof local);
    RUN(btl->btl_get(btl, ep, local, base, local_handle, remote, 8 * sizeof(int64_t), 0,
                     MCA_BTL_NO_ORDER, done, NULL, NULL));
    for (int i = 0; i < 8; ++i)
        CHECK(local[i] == rank * 1000 + i, "get slot %d: %lld", i, (long long)local[i]);

    /* slot 8: add 5, then fetch-add 3 (fetches 5) */
    RUN(btl->btl_atomic_op(btl, ep, base + 8 * 8, remote, MCA_BTL_ATOMIC_ADD, 5, 0,
                           MCA_BTL_NO_ORDER, done, NULL, NULL));
    local[8] = -1;
    RUN(btl->btl_atomic_fop(btl, ep, &local[8], base + 8 * 8, local_handle, remote,
                            MCA_BTL_ATOMIC_ADD, 3, 0, MCA_BTL_NO_ORDER, done, NULL, NULL));
    CHECK(local[8] == 5, "fetch-add fetched %lld", (long long)local[8]);

    /* slot 9: compare-swap 0 -> 42 succeeds, 0 -> 7 then fails */
    RUN(btl->btl_atomic_cswap(btl, ep, &local[9], base + 9 * 8, local_handle, remote, 0, 42, 0,
                              MCA_BTL_NO_ORDER, done, NULL, NULL));
    CHECK(local[9] == 0, "first cswap fetched %lld", (long long)local[9]);
    RUN(btl->btl_atomic_cswap(btl, ep, &local[9], base + 9 * 8, local_handle, remote, 0, 7, 0,
                              MCA_BTL_NO_ORDER, done, NULL, NULL));
    CHECK(local[9] == 42, "second cswap fetched %lld", (long long)local[9]);

    /* slot 10, 32-bit: swap in 0x11223344, fetch it back with max */
    if (btl->btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_32BIT) {
        int32_t* fetched = (int32_t*)&local[10];
        RUN(btl->btl_atomic_fop(btl, ep, fetched, base + 10 * 8, local_handle, remote,
                                MCA_BTL_ATOMIC_SWAP, 0x11223344, MCA_BTL_ATOMIC_FLAG_32BIT,
                                MCA_BTL_NO_ORDER, done, NULL, NULL));
        CHECK(*fetched == 0, "32-bit swap fetched %d", *fetched);
        RUN(btl->btl_atomic_fop(btl, ep, fetched, base + 10 * 8, local_handle, remote,
                                MCA_BTL_ATOMIC_MAX, 5, MCA_BTL_ATOMIC_FLAG_32BIT, MCA_BTL_NO_ORDER,
                                done, NULL, NULL));
        CHECK(*fetched == 0x11223344, "32-bit max fetched %#x", *fetched);
    }
    if (btl->btl_flush != NULL) CHECK(btl->btl_flush(btl, ep) == OPAL_SUCCESS, "flush failed");

    /* The peer did the same to us: our exposed memory shows it. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < 8; ++i)
        CHECK(exposed[i] == peer * 1000 + i, "slot %d holds %lld", i, (long long)exposed[i]);
    CHECK(exposed[8] == 8, "slot 8 holds %lld", (long long)exposed[8]);
    CHECK(exposed[9] == 42, "slot 9 holds %lld", (long long)exposed[9]);
    if (btl->btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_32BIT) {
        int32_t low;
        memcpy(&low, &exposed[10], sizeof low);
        CHECK(low == 0x11223344, "slot 10 holds %#x", low);
    }

    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (mine != NULL) {
        btl->btl_deregister_mem(btl, mine);
        btl->btl_deregister_mem(btl, local_handle);
    }
    if (rank == 0)
        printf("btl_direct: put/get/atomics%s through transit module %p checked\n",
               (btl->btl_atomic_flags & MCA_BTL_ATOMIC_SUPPORTS_32BIT) ? " (64 and 32 bit)" : "",
               (void*)btl);
    MPI_OK(MPI_Finalize());
    return 0;
}
