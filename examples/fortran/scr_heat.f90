! scr_heat.f90: 2-D heat diffusion in Fortran, written against SCR's
! Fortran calls (include 'scrf.h') only, to run on frame's libscr. Each
! checkpoint is a dataset "ckpt.<step>" of one file per rank,
! "ckpt.<step>/rank_<r>.ckpt" below the working directory, written when
! SCR_NEED_CHECKPOINT says so (set SCR_CHECKPOINT_INTERVAL).
!
!   mpif90 scr_heat.f90 -I ffi/scr/include -lscrf -lscr -o scr_heat
!   SCR_CHECKPOINT_INTERVAL=20 mpiexec -n 8 ./scr_heat NX NY STEPS [CRASH_AT]
!
! With CRASH_AT, the last rank kills itself with SIGKILL before step
! CRASH_AT unless the run is a restart, which ends the whole MPI job; the
! same command run again resumes from the newest checkpoint (an older one
! when a rank cannot read its file) and rank 0 prints "restarted at step N
! in T ms". At the end the last rank prints "final checksum: 0x..."
! (heat_solver.inc), the same in every run of the same work.
program scr_heat
   use mpi
   use, intrinsic :: iso_c_binding, only: c_int
   implicit none
   include 'scrf.h'

   interface
      integer(c_int) function c_raise(sig) bind(c, name='raise')
         import :: c_int
         integer(c_int), value :: sig
      end function
   end interface

   integer, parameter :: SIGKILL = 9
   real(8), parameter :: TOP = 100d0, BOTTOM = 0d0, LEFT = 75d0, RIGHT = 50d0
   character(len=SCR_MAX_FILENAME) :: name, path, file
   integer :: nx, ny, steps, crash_at, comm, rank, nranks, rows, err, status
   integer :: up, down, step, have, valid, need, halt, unit, io
   real(8), allocatable :: u(:, :), next(:, :)
   real(8) :: started, mine, slowest
   logical :: restarted

   call MPI_Init(err)
   started = MPI_Wtime()
   if (command_argument_count() < 3) then
      write (0, '(a)') 'usage: scr_heat NX NY STEPS [CRASH_AT]'
      call MPI_Finalize(err)
      stop 2
   end if
   nx = int_argument(1)
   ny = int_argument(2)
   steps = int_argument(3)
   crash_at = -1
   if (command_argument_count() > 3) crash_at = int_argument(4)

   call SCR_INIT(err)
   if (err /= SCR_SUCCESS) then
      write (0, '(a)') 'scr_heat: SCR_INIT failed'
      call MPI_Finalize(err)
      stop 3
   end if
   comm = MPI_COMM_WORLD
   call MPI_Comm_rank(comm, rank, err)
   call MPI_Comm_size(comm, nranks, err)
   if (nx < nranks .or. ny < 1 .or. steps < 0) then
      if (rank == 0) write (0, '(a)') 'scr_heat: need at least one row per rank'
      call MPI_Abort(MPI_COMM_WORLD, 2, err)
   end if
   rows = nx/nranks
   if (rank < mod(nx, nranks)) rows = rows + 1
   allocate (u(0:ny + 1, 0:rows + 1), next(0:ny + 1, 0:rows + 1))
   call initial_grid()
   up = rank - 1
   if (rank == 0) up = MPI_PROC_NULL
   down = rank + 1
   if (rank == nranks - 1) down = MPI_PROC_NULL

   ! The restart: the newest checkpoint, or older ones while a rank
   ! cannot read its file.
   step = 0
   restarted = .false.
   call SCR_HAVE_RESTART(have, name, err)
   if (err /= SCR_SUCCESS) call MPI_Abort(MPI_COMM_WORLD, 5, err)
   do while (have == 1)
      call SCR_START_RESTART(name, err)
      if (err /= SCR_SUCCESS) call MPI_Abort(MPI_COMM_WORLD, 5, err)
      write (path, '(a,a,i0,a)') trim(name), '/rank_', rank, '.ckpt'
      call SCR_ROUTE_FILE(path, file, err)
      valid = 0
      if (err == SCR_SUCCESS) then
         open (newunit=unit, file=trim(file), access='stream', form='unformatted', &
               status='old', action='read', iostat=io)
         if (io == 0) then
            read (unit, iostat=io) step, u
            close (unit)
            if (io == 0) valid = 1
         end if
      end if
      call SCR_COMPLETE_RESTART(valid, err)
      if (err == SCR_SUCCESS) then
         restarted = .true.
         exit
      end if
      call SCR_HAVE_RESTART(have, name, err)
      if (err /= SCR_SUCCESS) call MPI_Abort(MPI_COMM_WORLD, 5, err)
   end do
   if (.not. restarted) then
      step = 0
      call initial_grid()
   else
      mine = MPI_Wtime() - started
      call MPI_Reduce(mine, slowest, 1, MPI_DOUBLE_PRECISION, MPI_MAX, 0, comm, err)
      if (rank == 0) then
         write (*, '(a,i0,a,f0.1,a)') 'restarted at step ', step, ' in ', slowest*1d3, ' ms'
         flush (6)
      end if
   end if

   do while (step < steps)
      call SCR_NEED_CHECKPOINT(need, err)
      if (err /= SCR_SUCCESS) call MPI_Abort(MPI_COMM_WORLD, 6, err)
      if (need == 1) call checkpoint()
      call SCR_SHOULD_EXIT(halt, err)
      if (err /= SCR_SUCCESS) call MPI_Abort(MPI_COMM_WORLD, 6, err)
      if (halt == 1) exit
      if (.not. restarted .and. step == crash_at .and. rank == nranks - 1) then
         write (0, '(a,i0,a,i0)') 'scr_heat: rank ', rank, ' crashing at step ', step
         flush (0)
         err = int(c_raise(int(SIGKILL, c_int)))
      end if
      call heat_step()
      step = step + 1
   end do

   call report()
   call SCR_FINALIZE(err)
   deallocate (u, next)
   call MPI_Finalize(status)
   if (err /= SCR_SUCCESS) stop 1

contains

   ! The plate's fixed edge temperatures, zero inside.
   subroutine initial_grid()
      u = 0d0
      u(0, :) = LEFT
      u(ny + 1, :) = RIGHT
      if (rank == 0) u(:, 0) = TOP
      if (rank == nranks - 1) u(:, rows + 1) = BOTTOM
      next = u
   end subroutine initial_grid

   ! Dataset ckpt.<step>: this rank's step and grid in one file.
   subroutine checkpoint()
      write (name, '(a,i0)') 'ckpt.', step
      call SCR_START_OUTPUT(name, SCR_FLAG_CHECKPOINT, err)
      if (err /= SCR_SUCCESS) call MPI_Abort(MPI_COMM_WORLD, 6, err)
      write (path, '(a,a,i0,a)') trim(name), '/rank_', rank, '.ckpt'
      call SCR_ROUTE_FILE(path, file, err)
      valid = 0
      if (err == SCR_SUCCESS) then
         open (newunit=unit, file=trim(file), access='stream', form='unformatted', &
               status='replace', action='write', iostat=io)
         if (io == 0) then
            write (unit, iostat=io) step, u
            close (unit)
            if (io == 0) valid = 1
         end if
      end if
      call SCR_COMPLETE_OUTPUT(valid, err)
      if (err /= SCR_SUCCESS) then
         write (0, '(a,i0,a,a)') 'scr_heat: rank ', rank, ': checkpoint failed: ', trim(name)
         call MPI_Abort(MPI_COMM_WORLD, 6, err)
      end if
   end subroutine checkpoint

   include 'heat_solver.inc'

end program scr_heat
