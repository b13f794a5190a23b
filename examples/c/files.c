/* A program that keeps its state in a file it writes itself, with stdio:
 * each rank holds a vector of 64-bit integers (a different length on every
 * rank), advances it every step mixing in a sum over all ranks, and every
 * `--every` steps saves it with fwrite into a file checkpoint. After a
 * failure frame gives the file back and the rank reads it with fread.
 *
 *   files [--steps N] [--every K] [--level L] [--cells C]
 *         [--big-rank R --big-mib M] [--hold-after S --hold-file PATH]
 *
 * Rank r holds C + 977 r cells (rank R: M MiB instead). With --hold-after,
 * once the checkpoint of step S is promoted every rank says so and waits
 * until PATH exists (for tests that look at the job then). The last line of
 * rank 0's output is `final checksum: 0x<16 hex digits>`. Build it against
 * libframe (`make -C ffi install`, then `cc files.c $(pkg-config --cflags
 * --libs frame)`) and run it under `frame run`.
 */
#include <frame.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct opts {
    long steps, every, cells, big_mib, hold_after;
    int level, big_rank;
    const char *hold_file;
};

struct state {
    struct opts o;
    uint64_t *x; /* kept across entries of the resilient function */
    size_t n;
};

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Writes the step and the vector into the file frame gives for `name`. */
static int save(const char *name, int64_t step, const uint64_t *x, size_t n) {
    char path[4096];
    int rc = frame_checkpoint_file(name, path, sizeof path);
    if (rc < 0) return rc;
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return FRAME_ERROR;
    }
    int ok = fwrite(&step, sizeof step, 1, f) == 1;
    /* In pieces of 8 MiB, as a real code writes its arrays. */
    for (size_t at = 0; ok && at < n; at += 1 << 20) {
        size_t part = n - at < (1u << 20) ? n - at : (1u << 20);
        ok = fwrite(x + at, sizeof *x, part, f) == part;
    }
    if (fclose(f) != 0 || !ok) {
        perror(path);
        return FRAME_ERROR;
    }
    return FRAME_OK;
}

/* Reads the step and the vector back from the recovered file. */
static int load(const char *name, int64_t *step, uint64_t *x, size_t n) {
    char path[4096];
    int rc = frame_recovered_file(name, path, sizeof path);
    if (rc < 0) return rc;
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return FRAME_ERROR;
    }
    int ok = fread(step, sizeof *step, 1, f) == 1 && fread(x, sizeof *x, n, f) == n;
    char extra;
    ok = ok && fread(&extra, 1, 1, f) == 0;
    fclose(f);
    if (!ok) {
        fprintf(stderr, "%s: not the size this rank saved\n", path);
        return FRAME_ERROR;
    }
    return FRAME_OK;
}

static int resilient_main(frame_ctx *ctx, int state, int n_failed, const int *failed_ranks,
                          void *user) {
    struct state *s = user;
    const struct opts *o = &s->o;
    (void)state;
    (void)n_failed;
    (void)failed_ranks;
    int rank = frame_rank(ctx), size = frame_size(ctx);
    int rc = frame_init(NULL, ctx);
    if (rc < 0) return rc;
    size_t n = rank == o->big_rank ? (size_t)o->big_mib << 17 : (size_t)(o->cells + 977 * rank);
    if (s->n != n) {
        free(s->x);
        s->x = malloc(n * sizeof *s->x);
        s->n = n;
        if (!s->x) return FRAME_ERROR;
    }
    uint64_t *x = s->x;
    int64_t step = 0;
    if (frame_status() == FRAME_DONE) {
        if ((rc = frame_recover()) < 0) return rc;
        if ((rc = load("state.bin", &step, x, n)) < 0) return rc;
        printf("rank %d recovered step %" PRId64 " from its file\n", rank, step);
        fflush(stdout);
    } else {
        for (size_t i = 0; i < n; i++) x[i] = mix(i * (uint64_t)size + (uint64_t)rank);
    }
    while (step < o->steps) {
        if ((rc = frame_fault_point(ctx, step)) < 0) return rc;
        int64_t mine = (int64_t)((x[0] ^ x[n - 1]) & 0xffffffffffULL);
        if ((rc = frame_allreduce_i64(ctx, &mine, 1, FRAME_SUM)) < 0) return rc;
        for (size_t i = 0; i < n; i++) x[i] = mix(x[i] + (uint64_t)mine + (uint64_t)step);
        step++;
        if (step % o->every == 0) {
            if ((rc = frame_begin_checkpoint(o->level)) < 0) return rc;
            if ((rc = save("state.bin", step, x, n)) < 0) return rc;
            int64_t id = frame_end_checkpoint();
            if (id < 0) return (int)id;
            if (step == o->hold_after && o->hold_file) {
                if ((rc = frame_wait_promotions()) < 0) return rc;
                printf("rank %d: checkpoint %" PRId64 " of step %" PRId64 " promoted, holding\n", rank, id, step);
                fflush(stdout);
                struct timespec pause = {0, 10 * 1000 * 1000};
                FILE *h;
                while (!(h = fopen(o->hold_file, "r"))) nanosleep(&pause, NULL);
                fclose(h);
            }
        }
    }
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) h = mix(h ^ x[i]);
    int64_t sum = (int64_t)(h & 0xffffffffffULL) * (rank + 1);
    if ((rc = frame_allreduce_i64(ctx, &sum, 1, FRAME_SUM)) < 0) return rc;
    if (rank == 0) {
        printf("final checksum: 0x%016" PRIx64 "\n", mix((uint64_t)sum));
        fflush(stdout);
    }
    return frame_finalize();
}

int main(int argc, char **argv) {
    static struct state s = {{200, 10, 5000, 0, -1, 1, -1, NULL}, NULL, 0};
    for (int i = 1; i + 1 < argc; i += 2) {
        long v = strtol(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--steps")) s.o.steps = v;
        else if (!strcmp(argv[i], "--every")) s.o.every = v;
        else if (!strcmp(argv[i], "--level")) s.o.level = (int)v;
        else if (!strcmp(argv[i], "--cells")) s.o.cells = v;
        else if (!strcmp(argv[i], "--big-rank")) s.o.big_rank = (int)v;
        else if (!strcmp(argv[i], "--big-mib")) s.o.big_mib = v;
        else if (!strcmp(argv[i], "--hold-after")) s.o.hold_after = v;
        else if (!strcmp(argv[i], "--hold-file")) s.o.hold_file = argv[i + 1];
        else {
            fprintf(stderr, "files: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (s.o.steps < 0 || s.o.every < 1 || s.o.cells < 1 || s.o.big_mib < 0) {
        fprintf(stderr, "files: bad numbers\n");
        return 2;
    }
    return frame_run(argc, argv, resilient_main, &s);
}
