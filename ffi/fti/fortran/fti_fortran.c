/*
 * fti_fortran.c: the C half of the Fortran module (fti.f90), compiled with
 * the program's mpicc. A Fortran program names communicators by MPI's
 * Fortran handles, which only that MPI's own C macros or functions convert;
 * and a Fortran module cannot refer to libfti's type handles (C globals)
 * without defining them again, so they are read here.
 */
#include <fti.h>

/* FTI_Init on the communicator whose Fortran handle is *comm; on success
 * *comm becomes FTI_COMM_WORLD's Fortran handle. */
int frame_fti_init_fortran(const char *config, MPI_Fint *comm) {
    int rc = FTI_Init(config, MPI_Comm_f2c(*comm));
    if (rc == FTI_SCES) *comm = MPI_Comm_c2f(FTI_COMM_WORLD);
    return rc;
}

/* The handles of char, short, int, long, float and double, in that order,
 * and the size of long. */
void frame_fti_c_handles(fti_id_t handles[6], int *long_size) {
    handles[0] = FTI_CHAR;
    handles[1] = FTI_SHRT;
    handles[2] = FTI_INTG;
    handles[3] = FTI_LONG;
    handles[4] = FTI_SFLT;
    handles[5] = FTI_DBLE;
    *long_size = (int)sizeof(long);
}
