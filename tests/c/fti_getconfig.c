/*
 * fti_getconfig.c: FTI_GetConfig read back after FTI_Init, a few
 * protected variables and one FTI_Checkpoint.
 *
 *   mpiexec -n N ./fti_getconfig CONFIG
 *
 * Every rank prints its answer as "R key value" lines, rank by rank; the
 * test compares them with the configuration it wrote and the ranks' places.
 */
#include <fti.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc != 2) {
        fprintf(stderr, "usage: fti_getconfig CONFIG\n");
        return 2;
    }
    FTIT_allConfiguration before = FTI_GetConfig(argv[1], MPI_COMM_WORLD);
    if (FTI_Init(argv[1], MPI_COMM_WORLD) != FTI_SCES) return 1;
    int rank, size;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    int a = rank, b[3] = {1, 2, 3};
    double c[5] = {0};
    FTI_Protect(0, &a, 1, FTI_INTG);
    FTI_Protect(1, b, 3, FTI_INTG);
    FTI_Protect(2, c, 5, FTI_DBLE);
    FTIT_H5Group g;
    FTI_InitGroup(&g, "g", NULL);
    if (FTI_Checkpoint(7, 2) != FTI_DONE) return 1;
    FTIT_allConfiguration all = FTI_GetConfig(argv[1], FTI_COMM_WORLD);
    const FTIT_configuration *k = &all.configuration;
    const FTIT_topology *t = &all.topology;
    const FTIT_execution *e = &all.execution;
    for (int r = 0; r < size; r++) {
        MPI_Barrier(FTI_COMM_WORLD);
        if (r != rank) continue;
        printf("%d before.initSCES %d\n", rank, before.execution.initSCES);
        printf("%d ioMode %d\n", rank, k->ioMode);
        printf("%d verbosity %d\n", rank, k->verbosity);
        printf("%d saveLastCkpt %d\n", rank, k->saveLastCkpt);
        printf("%d keepL4Ckpt %d\n", rank, (int)k->keepL4Ckpt);
        printf("%d dcpPosix %d\n", rank, (int)k->dcpPosix);
        printf("%d stagingEnabled %d\n", rank, (int)k->stagingEnabled);
        printf("%d blockSize %d\n", rank, k->blockSize);
        printf("%d transferSize %d\n", rank, k->transferSize);
        printf("%d test %d\n", rank, k->test);
        printf("%d cfgFile %s\n", rank, k->cfgFile);
        printf("%d localDir %s\n", rank, k->localDir);
        printf("%d glbalDir %s\n", rank, k->glbalDir);
        printf("%d nbProc %d\n", rank, t->nbProc);
        printf("%d nbNodes %d\n", rank, t->nbNodes);
        printf("%d myRank %d\n", rank, t->myRank);
        printf("%d splitRank %d\n", rank, t->splitRank);
        printf("%d nodeSize %d\n", rank, t->nodeSize);
        printf("%d nbHeads %d\n", rank, t->nbHeads);
        printf("%d nbApprocs %d\n", rank, t->nbApprocs);
        printf("%d groupSize %d\n", rank, t->groupSize);
        printf("%d nodeID %d\n", rank, t->nodeID);
        printf("%d nodeRank %d\n", rank, t->nodeRank);
        printf("%d amIaHead %d\n", rank, t->amIaHead);
        for (int l = 1; l <= 4; l++) {
            printf("%d L%d.ckptIntv %d\n", rank, l, all.checkpoint[l].ckptIntv);
            printf("%d L%d.isInline %d\n", rank, l, all.checkpoint[l].isInline);
            printf("%d L%d.dir %s\n", rank, l, all.checkpoint[l].dir);
        }
        printf("%d id %s\n", rank, e->id);
        printf("%d reco %d\n", rank, e->reco);
        printf("%d ckptLvel %d\n", rank, e->ckptLvel);
        printf("%d ckptId %u\n", rank, e->ckptId);
        printf("%d ckptCnt %u\n", rank, e->ckptCnt);
        printf("%d nbVar %u\n", rank, e->nbVar);
        printf("%d nbGroup %d\n", rank, e->nbGroup);
        printf("%d initSCES %d\n", rank, e->initSCES);
        fflush(stdout);
    }
    FTI_Finalize();
    MPI_Finalize();
    return 0;
}
