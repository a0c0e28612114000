/* The C API reports why a call failed: transit_init with a misspelt btl name
 * returns an error, transit_last_error() names the bad value, and the same
 * text reaches the log, on stderr or through a sink set with
 * transit_set_log_sink.  Runs as a singleton; exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transit/transit.h"

static int failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stdout, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                              \
        }                                                                            \
    } while (0)

struct captured {
    int errors;
    int mentions_bad_value;
};

static void sink(transit_log_severity severity, int verbosity, const char* source, const char* text,
                 void* arg) {
    struct captured* c = arg;
    if (severity == TRANSIT_LOG_ERROR && verbosity == 0 && strcmp(source, "error") == 0) {
        ++c->errors;
        if (strstr(text, "vadr") != NULL) ++c->mentions_bad_value;
    }
}

/* Reads back what was written to descriptor 2 while `fn` ran. */
static void capture_stderr(void (*fn)(void), char* out, size_t size) {
    fflush(stderr);
    FILE* tmp = tmpfile();
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, size - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
}

static void failing_init(void) {
    transit_context* ctx = NULL;
    int rc = transit_init(NULL, NULL, &ctx);
    CHECK(rc < 0);
    CHECK(ctx == NULL);
}

int main(void) {
    setenv("TRANSIT_MCA_btl", "vadr", 1);
    CHECK(strcmp(transit_last_error(), "") == 0);

    /* Without a sink: the reason is on stderr and in transit_last_error. */
    char text[8192];
    capture_stderr(failing_init, text, sizeof text);
    CHECK(strstr(text, "error: ") != NULL);
    CHECK(strstr(text, "vadr") != NULL);
    CHECK(strstr(transit_last_error(), "vadr") != NULL);

    /* With a sink: every error line goes to it and none to stderr. */
    struct captured c = {0, 0};
    transit_set_log_sink(sink, &c);
    capture_stderr(failing_init, text, sizeof text);
    CHECK(c.errors >= 1);
    CHECK(c.mentions_bad_value >= 1);
    CHECK(strstr(text, "vadr") == NULL);

    /* NULL restores stderr. */
    transit_set_log_sink(NULL, NULL);
    c.errors = 0;
    capture_stderr(failing_init, text, sizeof text);
    CHECK(c.errors == 0);
    CHECK(strstr(text, "vadr") != NULL);

    if (failures) printf("%d check(s) failed; last stderr: %s\n", failures, text);
    return failures ? 1 : 0;
}
