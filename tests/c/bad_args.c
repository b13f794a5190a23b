/*
 * Bad arguments and calls out of order from C: each must return its error
 * code with a message, never crash. Run as a single rank (no runtime), with
 * FRAME_STORAGE_LOCAL_DIR set and FRAME_RETENTION_KEEP_ON_FINALIZE=true.
 * Prints one "ok" line per case and exits 1 if any case failed.
 */
#include <frame.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(const char *what, long got, long want) {
    const char *msg = frame_last_error();
    if (got != want) {
        printf("FAIL %s: got %ld, want %ld (%s)\n", what, got, want, msg);
        failures++;
    } else if (want < 0 && (msg == NULL || msg[0] == '\0')) {
        printf("FAIL %s: no message\n", what);
        failures++;
    } else {
        printf("ok %s: %s\n", what, want < 0 ? msg : "");
    }
}

static char thread_msg[512];

static void *other_thread(void *arg) {
    double *x = arg;
    long *out = (long *)(x + 1);
    out[0] = frame_protect(1, x, 1, FRAME_DOUBLE);
    out[1] = frame_snapshot();
    /* Each thread has its own last error. */
    snprintf(thread_msg, sizeof thread_msg, "%s", frame_last_error());
    return NULL;
}

static frame_ctx *saved;
static long thread_rank_rc;

static void *rank_from_thread(void *arg) {
    thread_rank_rc = frame_rank((frame_ctx *)arg);
    snprintf(thread_msg, sizeof thread_msg, "%s", frame_last_error());
    return NULL;
}

static int resilient(frame_ctx *ctx, int state, int n, const int *failed, void *user) {
    (void)state, (void)n, (void)failed, (void)user;
    saved = ctx;
    expect("rank in the resilient function", frame_rank(ctx), 0);
    expect("size in the resilient function", frame_size(ctx), 1);
    pthread_t t;
    pthread_create(&t, NULL, rank_from_thread, ctx);
    pthread_join(t, NULL);
    expect("context used from another thread", thread_rank_rc, FRAME_ESTATE);
    expect("the other thread's message says why", strstr(thread_msg, "not the live one") != NULL, 1);
    int64_t v[2] = {3, 4};
    expect("all-reduce sum", frame_allreduce_i64(ctx, v, 2, FRAME_SUM), FRAME_OK);
    expect("all-reduce unknown operation", frame_allreduce_i64(ctx, v, 2, 42), FRAME_EINVAL);
    expect("all-reduce null values", frame_allreduce_f64(ctx, NULL, 2, FRAME_MAX), FRAME_EINVAL);
    expect("send to a rank that does not exist", frame_send(ctx, 5, 0, v, 8), FRAME_EINVAL);
    expect("send with a negative tag", frame_send(ctx, 0, -1, v, 8), FRAME_EINVAL);
    char comm[64];
    expect("MPI communicator outside frame_run_ulfm", frame_mpi_comm(ctx, comm), FRAME_EUNSUPPORTED);
    expect("MPI communicator into a null pointer", frame_mpi_comm(ctx, NULL), FRAME_EINVAL);
    uint64_t epoch = 0;
    expect("the entry outside frame_run_ulfm", frame_mpi_running(NULL, &epoch), FRAME_EUNSUPPORTED);
    return 0;
}

int main(int argc, char **argv) {
    double a[10] = {0}, b[20] = {0};
    /* Before frame_init. */
    expect("protect before init", frame_protect(0, a, 10, FRAME_DOUBLE), FRAME_ESTATE);
    expect("snapshot before init", frame_snapshot(), FRAME_ESTATE);
    expect("rank of a null context", frame_rank(NULL), FRAME_EINVAL);
    expect("rank of a made-up context", frame_rank((frame_ctx *)0x1234), FRAME_ESTATE);
    expect("MPI communicator of a null context", frame_mpi_comm(NULL, a), FRAME_EINVAL);
    /* No entry running is an answer, not a failure: the last error stays. */
    char before[512];
    snprintf(before, sizeof before, "%s", frame_last_error());
    uint64_t epoch = 0;
    expect("no resilient function runs", frame_mpi_running(NULL, &epoch), FRAME_ESTATE);
    expect("the last error stays the program's", strcmp(before, frame_last_error()) == 0, 1);
    expect("success is no failed process", frame_mpi_failure(0), 0);
    expect("init", frame_init(NULL, NULL), FRAME_OK);
    expect("init twice", frame_init(NULL, NULL), FRAME_ESTATE);
    expect("protect a null pointer", frame_protect(0, NULL, 10, FRAME_DOUBLE), FRAME_EINVAL);
    expect("protect an unknown type", frame_protect(0, a, 10, 99), FRAME_EINVAL);
    expect("protect a negative count", frame_protect(0, a, -1, FRAME_DOUBLE), FRAME_EINVAL);
    expect("protect a negative id", frame_protect(-3, a, 10, FRAME_DOUBLE), FRAME_EINVAL);
    expect("protect", frame_protect(0, a, 10, FRAME_DOUBLE), FRAME_OK);
    expect("checkpoint at level 9", frame_checkpoint(1, 9), FRAME_EINVAL);
    expect("checkpoint with id 0", frame_checkpoint(0, 1), FRAME_EINVAL);
    expect("recover with nothing to recover", frame_recover(), FRAME_ENOREC);
    expect("stored size with nothing to recover", (long)frame_stored_size(0), FRAME_ENOREC);
    /* Another thread did not initialise. */
    double x[4] = {0};
    pthread_t t;
    pthread_create(&t, NULL, other_thread, x);
    pthread_join(t, NULL);
    long *out = (long *)(x + 1);
    expect("protect from a thread that did not initialise", out[0], FRAME_ESTATE);
    expect("snapshot from a thread that did not initialise", out[1], FRAME_ESTATE);
    expect("the other thread's own message names frame_init",
           strstr(thread_msg, "frame_init was not called on this thread") != NULL, 1);
    /* File checkpoints. */
    char path[4096], tiny[4];
    expect("file path outside a checkpoint", frame_checkpoint_file("f", path, sizeof path), FRAME_EINVAL);
    expect("begin at level 0", frame_begin_checkpoint(0), FRAME_EINVAL);
    expect("begin at level 2 with level 1 only", frame_begin_checkpoint(2), FRAME_ERROR);
    expect("begin", frame_begin_checkpoint(1), FRAME_OK);
    expect("begin twice", frame_begin_checkpoint(1), FRAME_ERROR);
    expect("snapshot inside a checkpoint of files", frame_snapshot(), FRAME_ERROR);
    expect("a null file name", frame_checkpoint_file(NULL, path, sizeof path), FRAME_EINVAL);
    expect("a file name with a slash", frame_checkpoint_file("../x", path, sizeof path), FRAME_EINVAL);
    expect("a buffer too small for the path", frame_checkpoint_file("f", tiny, sizeof tiny), FRAME_EINVAL);
    expect("a null buffer", frame_checkpoint_file("f", NULL, 0), FRAME_EINVAL);
    expect("file path", frame_checkpoint_file("f", path, sizeof path), FRAME_OK);
    FILE *f = fopen(path, "wb");
    expect("the path can be written", f != NULL, 1);
    if (f) {
        fputs("file content", f);
        fclose(f);
    }
    expect("end the checkpoint of files", (long)frame_end_checkpoint(), 1);
    expect("end with none begun", (long)frame_end_checkpoint(), FRAME_ERROR);
    expect("recovered file when nothing was recovered", frame_recovered_file("f", path, sizeof path), FRAME_EINVAL);
    a[3] = 7.5;
    expect("checkpoint", frame_checkpoint(1, 1), FRAME_OK);
    expect("finalize", frame_finalize(), FRAME_OK);
    expect("protect after finalize", frame_protect(0, a, 10, FRAME_DOUBLE), FRAME_ESTATE);
    expect("finalize twice", frame_finalize(), FRAME_ESTATE);
    /* The kept checkpoint, restored into regions of another size. */
    expect("init again", frame_init(NULL, NULL), FRAME_OK);
    expect("status finds the checkpoint", frame_status(), FRAME_DONE);
    expect("stored size", (long)frame_stored_size(0), (long)sizeof a);
    expect("stored size of an unknown region", (long)frame_stored_size(8), FRAME_EINVAL);
    expect("protect a larger region", frame_protect(0, b, 20, FRAME_DOUBLE), FRAME_OK);
    expect("recover into a region of another size", frame_recover(), FRAME_EMISMATCH);
    memset(a, 0, sizeof a);
    expect("protect the right size", frame_protect(0, a, 10, FRAME_DOUBLE), FRAME_OK);
    expect("recover", frame_recover(), FRAME_OK);
    expect("the value came back", (long)(a[3] * 2), 15);
    expect("the newest checkpoint held no file", frame_recovered_file("f", path, sizeof path), FRAME_EINVAL);
    expect("finalize after recovery", frame_finalize(), FRAME_OK);
    /* The runtime entry, and its context once it ended. */
    expect("frame_run without a function", frame_run(argc, argv, NULL, NULL), FRAME_EINVAL);
    expect("frame_run", frame_run(argc, argv, resilient, NULL), 0);
    expect("a context after its function returned", frame_rank(saved), FRAME_ESTATE);
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
