! fti_heat.f90: 2-D heat diffusion in Fortran, written against FTI's
! Fortran module (`use fti`) only, to run on frame's libfti. Rows are split
! over the ranks of FTI's communicator, halos travel with MPI_Sendrecv, and
! FTI_Snapshot checkpoints the step and the grid at the configured interval.
!
!   make -C ffi/fti/fortran OUT=DIR
!   mpif90 fti_heat.f90 -I DIR -L DIR -lfti_f90 -lfti -o fti_heat
!   mpiexec -n 8 ./fti_heat config.fti NX NY STEPS [CRASH_AT]
!
! With CRASH_AT, the last rank kills itself with SIGKILL before step
! CRASH_AT unless the run is a restart, which ends the whole MPI job; the
! same command run again resumes from the newest checkpoint and rank 0
! prints "restarted at step N in T ms". At the end the last rank prints
! "final checksum: 0x..." (32-bit FNV-1a over the grid's interior in
! global order), the same in every run of the same work.
program fti_heat
   use fti
   use mpi
   use, intrinsic :: iso_c_binding, only: c_int
   implicit none

   interface
      integer(c_int) function c_raise(sig) bind(c, name='raise')
         import :: c_int
         integer(c_int), value :: sig
      end function
   end interface

   integer, parameter :: SIGKILL = 9
   real(8), parameter :: TOP = 100d0, BOTTOM = 0d0, LEFT = 75d0, RIGHT = 50d0
   character(len=4096) :: config
   integer :: nx, ny, steps, crash_at, comm, rank, nranks, rows, err, status
   integer :: up, down
   integer, pointer :: step
   real(8), pointer :: u(:, :)
   real(8), allocatable :: next(:, :)
   real(8) :: started, mine, slowest
   logical :: restart, announce

   call MPI_Init(err)
   started = MPI_Wtime()
   if (command_argument_count() < 4) then
      write (0, '(a)') 'usage: fti_heat CONFIG NX NY STEPS [CRASH_AT]'
      call MPI_Finalize(err)
      stop 2
   end if
   call get_command_argument(1, config)
   nx = int_argument(2)
   ny = int_argument(3)
   steps = int_argument(4)
   crash_at = -1
   if (command_argument_count() > 4) crash_at = int_argument(5)

   comm = MPI_COMM_WORLD
   call FTI_Init(config, comm, err)
   if (err /= FTI_SCES) then
      write (0, '(a,i0)') 'fti_heat: FTI_Init returned ', err
      call MPI_Finalize(err)
      stop 3
   end if
   call MPI_Comm_rank(comm, rank, err)
   call MPI_Comm_size(comm, nranks, err)
   if (nx < nranks .or. ny < 1 .or. steps < 0) then
      if (rank == 0) write (0, '(a)') 'fti_heat: need at least one row per rank'
      call MPI_Abort(MPI_COMM_WORLD, 2, err)
   end if

   ! The rank's share of the rows (the first ranks take one more when they
   ! do not divide evenly), with a halo row on each side and a halo column
   ! on each end: u(column, row), so that a row is contiguous.
   rows = nx/nranks
   if (rank < mod(nx, nranks)) rows = rows + 1
   allocate (u(0:ny + 1, 0:rows + 1), next(0:ny + 1, 0:rows + 1))
   u = 0d0
   u(0, :) = LEFT
   u(ny + 1, :) = RIGHT
   if (rank == 0) u(:, 0) = TOP
   if (rank == nranks - 1) u(:, rows + 1) = BOTTOM
   next = u
   up = rank - 1
   if (rank == 0) up = MPI_PROC_NULL
   down = rank + 1
   if (rank == nranks - 1) down = MPI_PROC_NULL

   allocate (step)
   step = 0
   call FTI_Status(status)
   restart = status /= 0
   announce = restart
   call FTI_Protect(0, step, err)
   if (err == FTI_SCES) call FTI_Protect(1, u, err)
   if (err /= FTI_SCES) then
      write (0, '(a,i0,a)') 'fti_heat: rank ', rank, ': FTI_Protect failed'
      call MPI_Abort(MPI_COMM_WORLD, 5, err)
   end if

   do while (step < steps)
      call FTI_Snapshot(err)
      if (err /= FTI_SCES .and. err /= FTI_DONE) then
         write (0, '(a,i0,a,i0)') 'fti_heat: rank ', rank, ': FTI_Snapshot returned ', err
         call MPI_Abort(MPI_COMM_WORLD, 5, err)
      end if
      if (announce) then
         mine = MPI_Wtime() - started
         call MPI_Reduce(mine, slowest, 1, MPI_DOUBLE_PRECISION, MPI_MAX, 0, comm, err)
         if (rank == 0) then
            write (*, '(a,i0,a,f0.1,a)') 'restarted at step ', step, ' in ', slowest*1d3, ' ms'
            flush (6)
         end if
         announce = .false.
      end if
      if (.not. restart .and. step == crash_at .and. rank == nranks - 1) then
         write (0, '(a,i0,a,i0)') 'fti_heat: rank ', rank, ' crashing at step ', step
         flush (0)
         err = int(c_raise(int(SIGKILL, c_int)))
      end if
      call heat_step()
      step = step + 1
   end do

   call report()
   call FTI_Finalize(err)
   deallocate (u, next, step)
   call MPI_Finalize(status)
   if (err /= FTI_SCES) stop 1

contains

   include 'heat_solver.inc'

end program fti_heat
