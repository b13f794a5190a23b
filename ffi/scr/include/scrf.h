! scrf.h: SCR's Fortran constants (version 3.1) for programs on frame's
! libscr, as an INCLUDE file that reads alike in fixed and free form.
! The calls are subroutines with the C calls' arguments and an integer
! IERROR last (SCR_SUCCESS or 1), e.g. CALL SCR_ROUTE_FILE(NAME, FILE,
! IERROR). Link with -lscrf -lscr.

      INTEGER SCR_SUCCESS
      PARAMETER (SCR_SUCCESS=0)

      INTEGER SCR_MAX_FILENAME
      PARAMETER (SCR_MAX_FILENAME=1024)

      INTEGER SCR_FLAG_NONE
      PARAMETER (SCR_FLAG_NONE=0)

      INTEGER SCR_FLAG_CHECKPOINT
      PARAMETER (SCR_FLAG_CHECKPOINT=1)

      INTEGER SCR_FLAG_OUTPUT
      PARAMETER (SCR_FLAG_OUTPUT=2)
