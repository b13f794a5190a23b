/*
 * checks.h: the checks of the C test programs. Each prints "ok: WHAT" on
 * rank 0 when it holds and "FAIL: rank R: WHAT" on any rank when it does
 * not; `failures` counts this rank's failed checks.
 */
#ifndef FRAME_TEST_CHECKS_H
#define FRAME_TEST_CHECKS_H

#include <stdio.h>

static int failures = 0;
static int rank = 0;

static void check(int cond, const char *what) {
    if (!cond) {
        printf("FAIL: rank %d: %s\n", rank, what);
        failures++;
    } else if (rank == 0) {
        printf("ok: %s\n", what);
    }
    fflush(stdout);
}

#endif
