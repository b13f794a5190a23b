! fti_types.f90: FTI_Protect of the module `fti` for every intrinsic type
! FTI's Fortran interface names, scalars and arrays of rank 1 to 7, a
! character array, a derived type by address with a composite type, a
! variable id by name, data set attributes, and a non-contiguous section
! (refused). Run twice
! under mpiexec with the same configuration:
!
!   first run:  protects and fills every variable, checkpoints at level 2,
!               then the last rank SIGKILLs the job;
!   second run: protects the variables again (zeroed), recovers them and
!               checks every value.
!
! Every check prints "ok: ..." or "FAIL: ..."; the last line of a second
! run that passed is "types: all recovered".
program fti_types
   use fti
   use mpi
   use, intrinsic :: iso_c_binding
   implicit none

   interface
      integer(c_int) function c_raise(sig) bind(c, name='raise')
         import :: c_int
         integer(c_int), value :: sig
      end function
   end interface

   type, bind(c) :: particle
      real(c_double) :: mass
      real(c_double) :: pos(3)
      integer(c_int) :: tag
   end type particle

   character(len=4096) :: config
   integer :: comm, rank, nranks, err, status, failures, id_named, i, ptype
   integer(8) :: stored
   integer(1), pointer :: i1(:)
   integer(2), pointer :: i2(:, :)
   integer(4), pointer :: i4
   integer(8), pointer :: i8(:, :, :)
   logical(1), pointer :: l1(:)
   logical(2), pointer :: l2(:)
   logical(4), pointer :: l4(:, :)
   logical(8), pointer :: l8
   real(4), pointer :: r4(:, :, :, :)
   real(8), pointer :: r8(:, :, :, :, :, :, :), whole(:, :), section(:, :)
   complex(4), pointer :: c4(:)
   complex(8), pointer :: c8(:, :, :, :, :)
   character(len=5), pointer :: text(:)
   type(particle), target :: swarm(4)
   logical :: restart

   failures = 0
   call MPI_Init(err)
   call get_command_argument(1, config)
   comm = MPI_COMM_WORLD
   call FTI_Init(config, comm, err)
   if (err /= FTI_SCES) then
      write (0, '(a,i0)') 'fti_types: FTI_Init returned ', err
      call MPI_Finalize(err)
      stop 3
   end if
   call MPI_Comm_rank(comm, rank, err)
   call MPI_Comm_size(comm, nranks, err)
   call FTI_Status(status)
   restart = status /= 0

   allocate (i1(7), i2(3, 4), i4, i8(2, 3, 2), l1(5), l2(3), l4(2, 2), l8)
   allocate (r4(2, 2, 3, 2), r8(2, 1, 2, 1, 3, 1, 2), whole(6, 4), c4(3), c8(1, 2, 1, 2, 2))
   allocate (text(3))
   call clear()

   call FTI_Protect(1, i1, err)
   call check(err == FTI_SCES, 'integer(1), rank 1')
   call FTI_Protect(2, i2, err)
   call check(err == FTI_SCES, 'integer(2), rank 2')
   call FTI_Protect(3, i4, err)
   call check(err == FTI_SCES, 'integer(4), a scalar')
   call FTI_Protect(4, i8, err)
   call check(err == FTI_SCES, 'integer(8), rank 3')
   call FTI_Protect(5, l1, err)
   call check(err == FTI_SCES, 'logical(1)')
   call FTI_Protect(6, l2, err)
   call check(err == FTI_SCES, 'logical(2)')
   call FTI_Protect(7, l4, err)
   call check(err == FTI_SCES, 'logical(4), rank 2')
   call FTI_Protect(8, l8, err)
   call check(err == FTI_SCES, 'logical(8), a scalar')
   call FTI_Protect(9, r4, err)
   call check(err == FTI_SCES, 'real(4), rank 4')
   call FTI_Protect(10, r8, err)
   call check(err == FTI_SCES, 'real(8), rank 7')
   call FTI_Protect(11, c4, err)
   call check(err == FTI_SCES, 'complex(4)')
   call FTI_Protect(12, c8, err)
   call check(err == FTI_SCES, 'complex(8), rank 5')
   call FTI_Protect(13, text, err)
   call check(err == FTI_SCES, 'character(len=5), rank 1')
   ptype = FTI_InitCompositeType('particle', c_sizeof(swarm(1)))
   call check(ptype >= 0, 'a composite type')
   call check(FTI_AddScalarField(ptype, 'mass', FTI_REAL8, 0_c_size_t) == FTI_SCES, &
              'a scalar field')
   call check(FTI_AddVectorField(ptype, 'pos', FTI_REAL8, 8_c_size_t, 1, [3]) == FTI_SCES, &
              'a vector field')
   call check(FTI_AddScalarField(ptype, 'past', FTI_REAL8, c_sizeof(swarm(1))) == FTI_NSCS, &
              'a field past the end is refused')
   call FTI_setIDFromString('swarm', id_named)
   call check(id_named == 14, 'the next id for a name')
   call FTI_Protect(id_named, c_loc(swarm), size(swarm), ptype, err)
   call check(err == FTI_SCES, 'a derived type by address')
   call FTI_SetAttribute(10, 'field', FTI_ATTRIBUTE_NAME, err)
   call check(err == FTI_SCES, 'a data set name')
   call FTI_SetAttribute(10, [4_8, 6_8], FTI_ATTRIBUTE_DIM, err)
   call check(err == FTI_SCES, 'data set dimensions that hold the variable')
   call FTI_SetAttribute(10, [5, 5], FTI_ATTRIBUTE_DIM, err)
   call check(err == FTI_NSCS, 'dimensions that do not are refused')
   section => whole(1:6:2, :)
   call FTI_Protect(15, section, err)
   call check(err == FTI_NSCS, 'a non-contiguous section is refused')

   if (.not. restart) then
      call fill()
      call FTI_Checkpoint(1, 2, err)
      call check(err == FTI_DONE, 'a level-2 checkpoint')
      call FTI_GetStoredSize(10, stored)
      call check(stored == 0, 'nothing stored before a restart')
      call MPI_Barrier(comm, err)
      if (rank == 0) write (*, '(a)') 'types: checkpointed'
      flush (6)
      call MPI_Barrier(comm, err)
      if (failures == 0 .and. rank == nranks - 1) err = int(c_raise(9_c_int))
      call MPI_Barrier(comm, err)
   else
      call FTI_GetStoredSize(10, stored)
      call check(stored == 8*size(r8), 'the stored size of the rank-7 array')
      call FTI_Recover(err)
      call check(err == FTI_SCES, 'FTI_Recover')
      call verify()
      if (failures == 0) write (*, '(a,i0,a)') 'rank ', rank, ': types: all recovered'
   end if
   call FTI_Finalize(err)
   call MPI_Finalize(err)
   if (failures /= 0) stop 1

contains

   subroutine check(ok, what)
      logical, intent(in) :: ok
      character(len=*), intent(in) :: what
      if (ok) then
         write (*, '(a,i0,a,a)') 'rank ', rank, ': ok: ', what
      else
         write (*, '(a,i0,a,a)') 'rank ', rank, ': FAIL: ', what
         failures = failures + 1
      end if
   end subroutine check

   subroutine clear()
      i1 = 0; i2 = 0; i4 = 0; i8 = 0
      l1 = .false.; l2 = .false.; l4 = .false.; l8 = .false.
      r4 = 0; r8 = 0; c4 = 0; c8 = 0
      text = ''
      swarm = particle(0d0, [0d0, 0d0, 0d0], 0)
   end subroutine clear

   ! Values that differ by rank and by element.
   subroutine fill()
      integer :: k
      i1 = int([(k + rank, k=1, 7)], 1)
      i2 = reshape(int([(k*100 + rank, k=1, 12)], 2), shape(i2))
      i4 = 123456 + rank
      i8 = reshape([(int(k, 8)*10000000000_8 + rank, k=1, 12)], shape(i8))
      l1 = [(mod(k + rank, 2) == 0, k=1, 5)]
      l2 = [.true., .false., rank > 1]
      l4 = reshape([.false., .true., rank == 0, .true.], shape(l4))
      l8 = rank == 1
      r4 = reshape([(real(k, 4)/3 + rank, k=1, 24)], shape(r4))
      r8 = reshape([(real(k, 8)/7 + rank*1d3, k=1, 24)], shape(r8))
      c4 = [(cmplx(k, -rank, 4), k=1, 3)]
      c8 = reshape([(cmplx(k*0.5d0, rank*0.25d0, 8), k=1, 8)], shape(c8))
      text = ['alpha', 'beta ', 'gamma']
      text(2) (5:5) = achar(iachar('0') + rank)
      do k = 1, 4
         swarm(k) = particle(k*1.5d0 + rank, [k*1d0, -k*1d0, rank*1d0], k + 10*rank)
      end do
   end subroutine fill

   subroutine verify()
      integer(1) :: e1(7)
      integer(2) :: e2(3, 4)
      integer(4) :: e4
      integer(8) :: e8(2, 3, 2)
      logical(1) :: f1(5)
      logical(2) :: f2(3)
      logical(4) :: f4(2, 2)
      logical(8) :: f8
      real(4) :: s4(2, 2, 3, 2)
      real(8) :: s8(2, 1, 2, 1, 3, 1, 2)
      complex(4) :: d4(3)
      complex(8) :: d8(1, 2, 1, 2, 2)
      character(len=5) :: t(3)
      type(particle) :: p(4)
      logical :: same
      ! The expected values: fill() on copies.
      e1 = i1; e2 = i2; e4 = i4; e8 = i8; f1 = l1; f2 = l2; f4 = l4; f8 = l8
      s4 = r4; s8 = r8; d4 = c4; d8 = c8; t = text; p = swarm
      call fill()
      call check(all(e1 == i1) .and. all(e2 == i2) .and. e4 == i4 .and. all(e8 == i8), &
                 'the integers are back')
      call check(all(f1 .eqv. l1) .and. all(f2 .eqv. l2) .and. all(f4 .eqv. l4) &
                 .and. logical(f8 .eqv. l8), 'the logicals are back')
      call check(all(s4 == r4) .and. all(s8 == r8), 'the reals are back')
      call check(all(d4 == c4) .and. all(d8 == c8), 'the complex numbers are back')
      call check(all(t == text), 'the characters are back')
      same = .true.
      do i = 1, 4
         same = same .and. p(i)%mass == swarm(i)%mass .and. all(p(i)%pos == swarm(i)%pos) &
                .and. p(i)%tag == swarm(i)%tag
      end do
      call check(same, 'the derived type is back')
   end subroutine verify

end program fti_types
