/* The Transit C API: one function per method of transit::Context (transit.hpp),
 * same semantics, same status codes (TRANSIT_COMPLETED = 1 means "finished at
 * once", TRANSIT_SUCCESS = 0 "under way", negative values are errors). */
#ifndef TRANSIT_TRANSIT_H
#define TRANSIT_TRANSIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    TRANSIT_COMPLETED = 1,
    TRANSIT_SUCCESS = 0,
    TRANSIT_ERROR = -1,
    TRANSIT_OUT_OF_RESOURCE = -2,
    TRANSIT_NOT_AVAILABLE = -3,
    TRANSIT_UNREACHABLE = -4,
    TRANSIT_BAD_PARAM = -5,
    TRANSIT_NOT_FOUND = -6,
    TRANSIT_NOT_SUPPORTED = -7,
    TRANSIT_TRUNCATED = -8,
    TRANSIT_CANCELLED = -9,
    TRANSIT_TIMEOUT = -10,
    TRANSIT_PEER_FAILED = -11,
    TRANSIT_EXISTS = -12,
    TRANSIT_ACCESS_DENIED = -13,
    TRANSIT_PROTOCOL_ERROR = -14,
    TRANSIT_PEER_DEPARTED = -15
};

#define TRANSIT_ANY_RANK 0xffffffffu
#define TRANSIT_ANY_TAG 0xffffffffu

typedef struct transit_context transit_context;
typedef struct transit_request transit_request;
typedef struct transit_counter transit_counter;
typedef struct transit_memory_region transit_memory_region;
typedef struct transit_remote_key transit_remote_key;
typedef uint64_t transit_counter_ref;

typedef struct transit_status {
    uint32_t source;
    uint32_t tag;
    size_t length;
    size_t sent_length;
    int status;
} transit_status;

typedef enum {
    TRANSIT_ATOMIC_ADD,
    TRANSIT_ATOMIC_AND,
    TRANSIT_ATOMIC_OR,
    TRANSIT_ATOMIC_XOR,
    TRANSIT_ATOMIC_SWAP,
    TRANSIT_ATOMIC_MIN,
    TRANSIT_ATOMIC_MAX
} transit_atomic_op;

typedef enum { TRANSIT_ATOMIC_32, TRANSIT_ATOMIC_64 } transit_atomic_width;

typedef void (*transit_am_completion_fn)(transit_context* ctx, uint32_t source, void* buffer,
                                         size_t length, void* user_data);
typedef struct transit_am_destination {
    void* buffer;
    transit_am_completion_fn completion;
    void* user_data;
} transit_am_destination;
typedef transit_am_destination (*transit_am_header_fn)(transit_context* ctx, uint32_t source,
                                                       uint32_t handler, const void* header,
                                                       size_t header_length, size_t data_length,
                                                       void* handler_arg);

const char* transit_status_string(int status);

/* The full reason for this thread's last failed call, set by every call that
 * returns an error: the error line it logged (which parameter was wrong and
 * where it was set, ...), else the call, its peer and the status, e.g.
 * "send (peer 5, outside this job's ranks 0..1): bad parameter".  "" if
 * none failed; a call that succeeds leaves it.  (transit::last_error) */
const char* transit_last_error(void);

/* Transit's log lines (errors, warnings, verbose output) go to stderr unless
 * a sink is set: then each line is handed to it, without the process prefix
 * and the newline.  `verbosity` is the level of a verbose line (1..100), 0
 * otherwise.  The sink may be called from any thread Transit runs, must not
 * throw, and must not call transit_set_log_sink.  NULL restores stderr. */
typedef enum {
    TRANSIT_LOG_ERROR,
    TRANSIT_LOG_WARNING,
    TRANSIT_LOG_INFO,
    TRANSIT_LOG_VERBOSE
} transit_log_severity;
typedef void (*transit_log_fn)(transit_log_severity severity, int verbosity, const char* source,
                               const char* text, void* arg);
void transit_set_log_sink(transit_log_fn fn, void* arg);

/* How the program's threads may call the API (transit::ThreadLevel, MPI's
 * levels): SINGLE one thread; FUNNELED only the thread that called init;
 * SERIALIZED any thread, never two at once; MULTIPLE any thread at any time. */
typedef enum {
    TRANSIT_THREAD_SINGLE,
    TRANSIT_THREAD_FUNNELED,
    TRANSIT_THREAD_SERIALIZED,
    TRANSIT_THREAD_MULTIPLE
} transit_thread_level;

/* argc/argv may be NULL.  The thread level is the parameter
 * pml_base_thread_level (default single).  On failure *ctx is untouched and
 * transit_last_error() says why: TRANSIT_BAD_PARAM for a parameter,
 * TRANSIT_UNREACHABLE when no selected transport reaches some rank of the job
 * (every rank that cannot reach a peer fails its init), TRANSIT_ERROR else. */
int transit_init(int* argc, char*** argv, transit_context** ctx);
/* transit_init at thread level `required`; *provided (may be NULL) is set to
 * the level granted.  TRANSIT_BAD_PARAM when `required` is not a level. */
int transit_init_thread(int* argc, char*** argv, int required, int* provided,
                        transit_context** ctx);
/* The thread level granted. */
int transit_query_thread(const transit_context* ctx);
int transit_finalize(transit_context* ctx);
uint32_t transit_rank(const transit_context* ctx);
uint32_t transit_size(const transit_context* ctx);
int transit_progress(transit_context* ctx);
/* Progress until at least one event or timeout_ms milliseconds (< 0: none);
 * returns the events, 0 at the timeout.  Waits as pml_base_wait_policy says
 * (by default sleeping in the kernel when every transport can wake it; see
 * Context::progress(timeout) in transit.hpp). */
int transit_progress_timeout(transit_context* ctx, int timeout_ms);
/* For the caller's own poll/epoll loop (as ucp_worker_get_efd, FI_WAIT_FD): a
 * descriptor readable when a transport has work once transit_arm returned
 * TRANSIT_SUCCESS; -1 when a selected transport cannot wake a sleeper.  Loop:
 * progress until it returns 0, transit_arm, and only on TRANSIT_SUCCESS sleep
 * on the descriptor; TRANSIT_NOT_AVAILABLE means work came meanwhile.  The
 * next call that drives progress disarms.  Do not read or close it. */
int transit_event_fd(const transit_context* ctx);
int transit_arm(transit_context* ctx);

int transit_isend(transit_context* ctx, uint32_t dst, uint32_t tag, const void* buf, size_t len,
                  void* user, transit_request** req);
int transit_isendv(transit_context* ctx, uint32_t dst, uint32_t tag, const struct iovec* iov,
                   size_t count, void* user, transit_request** req);
int transit_irecv(transit_context* ctx, uint32_t src, uint32_t tag, void* buf, size_t len,
                  void* user, transit_request** req);
int transit_irecvv(transit_context* ctx, uint32_t src, uint32_t tag, const struct iovec* iov,
                   size_t count, void* user, transit_request** req);
void* transit_request_user(const transit_request* req);
int transit_test(transit_context* ctx, transit_request** req, int* done, transit_status* status);
int transit_wait(transit_context* ctx, transit_request** req, transit_status* status);
/* transit_wait for at most timeout_ms milliseconds: TRANSIT_TIMEOUT leaves
 * *req valid (and *status untouched) for a later wait, test or cancel. */
int transit_wait_timeout(transit_context* ctx, transit_request** req, int timeout_ms,
                         transit_status* status);
int transit_wait_any(transit_context* ctx, transit_request** reqs, size_t count, size_t* index,
                     transit_status* status);
int transit_wait_all(transit_context* ctx, transit_request** reqs, size_t count,
                     transit_status* statuses);
int transit_cancel(transit_context* ctx, transit_request* req);
int transit_probe(transit_context* ctx, uint32_t src, uint32_t tag, transit_status* status);
int transit_iprobe(transit_context* ctx, uint32_t src, uint32_t tag, int* found,
                   transit_status* status);
int transit_send(transit_context* ctx, uint32_t dst, uint32_t tag, const void* buf, size_t len);
int transit_recv(transit_context* ctx, uint32_t src, uint32_t tag, void* buf, size_t len,
                 transit_status* status);

/* Counters are created by the library. */
transit_counter* transit_counter_create(void);
void transit_counter_destroy(transit_counter* c);
transit_counter_ref transit_counter_ref_of(transit_context* ctx, transit_counter* c);
/* Peers can no longer name the counter (release before destroying a counter
   whose ref was given out); TRANSIT_BAD_PARAM for a ref not given out. */
int transit_counter_ref_release(transit_context* ctx, transit_counter_ref ref);
uint64_t transit_counter_get(transit_context* ctx, const transit_counter* c);
/* Events the counter waits for that will never come (their peer failed, or the
   active message did not all arrive). */
uint64_t transit_counter_lost(transit_context* ctx, const transit_counter* c);
/* TRANSIT_SUCCESS once the counter reaches value; TRANSIT_ERROR when it never
   will (get + lost reached value first). */
int transit_counter_wait(transit_context* ctx, const transit_counter* c, uint64_t value);

int transit_register_am_handler(transit_context* ctx, uint32_t id, transit_am_header_fn header,
                                transit_am_completion_fn completion, void* handler_arg);
/* origin, completion may be NULL; target 0 for none. */
int transit_am_send(transit_context* ctx, uint32_t dst, uint32_t id, const void* header,
                    size_t header_length, const void* data, size_t len, transit_counter* origin,
                    transit_counter_ref target, transit_counter* completion);

int transit_register_memory(transit_context* ctx, void* base, size_t size,
                            transit_memory_region** region);
/* Which peers may reach a region (transit_register_memory_scoped): every peer holding
 * its key (transit_register_memory's), the job's ranks only, or the `count` peers listed. */
enum transit_region_scope {
    TRANSIT_SCOPE_EVERYONE = 0,
    TRANSIT_SCOPE_JOB = 1,
    TRANSIT_SCOPE_PEERS = 2
};
int transit_register_memory_scoped(transit_context* ctx, void* base, size_t size,
                                   enum transit_region_scope scope, const uint32_t* peers,
                                   size_t count, transit_memory_region** region);
int transit_deregister_memory(transit_context* ctx, transit_memory_region** region);
/* Writes the packed key into buf (if capacity allows) and its size into *length. */
int transit_pack_key(transit_context* ctx, const transit_memory_region* region, void* buf,
                     size_t capacity, size_t* length);
int transit_unpack_key(transit_context* ctx, const void* packed, size_t length,
                       transit_remote_key** key);
void transit_release_key(transit_context* ctx, transit_remote_key** key);
int transit_put(transit_context* ctx, uint32_t dst, const void* src, size_t len,
                const transit_remote_key* key, uint64_t offset);
int transit_get(transit_context* ctx, uint32_t dst, void* dst_buf, size_t len,
                const transit_remote_key* key, uint64_t offset);
int transit_atomic(transit_context* ctx, uint32_t dst, transit_atomic_op op,
                   transit_atomic_width width, const transit_remote_key* key, uint64_t offset,
                   uint64_t operand, uint64_t* fetched);
int transit_cswap(transit_context* ctx, uint32_t dst, transit_atomic_width width,
                  const transit_remote_key* key, uint64_t offset, uint64_t compare, uint64_t value,
                  uint64_t* fetched);
int transit_flush(transit_context* ctx, uint32_t dst);
int transit_flush_all(transit_context* ctx);
int transit_fence(transit_context* ctx);
int transit_barrier(transit_context* ctx);

/* Peers outside the job (see Context::listen/connect/disconnect in
 * transit.hpp).  transit_listen writes the context's address, a
 * NUL-terminated line, into buf; TRANSIT_TRUNCATED (and *needed, when not
 * NULL, the size to pass) when it does not fit. */
int transit_listen(transit_context* ctx, char* buf, size_t size, size_t* needed);
int transit_connect(transit_context* ctx, const char* address, uint32_t* peer);
/* Graceful (Context::disconnect): TRANSIT_SUCCESS once the peer confirmed
 * what was sent to it; abortive: at once. */
int transit_disconnect(transit_context* ctx, uint32_t peer);
int transit_disconnect_abortive(transit_context* ctx, uint32_t peer);
/* Names (Context::publish/lookup/unpublish): the context's
 * address under a name.  transit_lookup waits up to wait_ms for the name to
 * be published (0: answers at once) and writes the address into buf like
 * transit_listen (TRANSIT_TRUNCATED and *needed when it does not fit).
 * TRANSIT_EXISTS: the name is taken; TRANSIT_NOT_FOUND: no such name;
 * TRANSIT_TIMEOUT: none within wait_ms; TRANSIT_NOT_SUPPORTED: no transport
 * carries peers outside the job.  Without a launcher that keeps names, this
 * user's name directory on the node keeps them. */
int transit_publish(transit_context* ctx, const char* name);
int transit_lookup(transit_context* ctx, const char* name, uint32_t wait_ms, char* buf, size_t size,
                   size_t* needed);
int transit_unpublish(transit_context* ctx, const char* name);
/* Peers outside the job that join, depart or fail (Context::on_peer_event):
 * fn (NULL: none) is called from progress with the peer's id. */
typedef enum {
    TRANSIT_PEER_EVENT_JOINED,
    TRANSIT_PEER_EVENT_DEPARTED,
    TRANSIT_PEER_EVENT_FAILED
} transit_peer_event_kind;
typedef void (*transit_peer_event_fn)(transit_context* ctx, uint32_t peer,
                                      transit_peer_event_kind kind, void* user);
void transit_on_peer_event(transit_context* ctx, transit_peer_event_fn fn, void* user);

void* transit_mem_alloc(transit_context* ctx, size_t size);
void transit_mem_free(transit_context* ctx, void* ptr);

#ifdef __cplusplus
}
#endif

#endif /* TRANSIT_TRANSIT_H */
