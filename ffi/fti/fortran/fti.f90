! fti.f90: the Fortran module `fti` of frame's libfti.
!
! Fortran programs written for FTI 1.6 (`use fti`) compile against this
! module and link with libfti_f90 and libfti unchanged: the same
! subroutines, arguments and type handles (FTI_REAL8, FTI_INTEGER4, ...).
! Every call goes to libfti's C interface (ffi/fti/include/fti.h), so the
! behaviour is the one docs/FTI.md and docs/FTI_CONFORMANCE.md describe.
!
! FTI_Protect takes a pointer to a scalar or to an array of any rank of the
! intrinsic types, and refuses (err = FTI_NSCS) a pointer to a
! non-contiguous section, whose elements are not one run of memory.
!
! Build (docs/FTI.md): make -C ffi/fti/fortran OUT=DIR builds DIR/fti.mod
! and DIR/libfti_f90.a (with fti_fortran.c, its C half) with mpif90 and
! mpicc.
module fti
   use, intrinsic :: iso_c_binding
   implicit none
   private

   !> Success.
   integer, parameter, public :: FTI_SCES = 0
   !> Failure (libfti prints the call and the cause).
   integer, parameter, public :: FTI_NSCS = -1
   !> A checkpoint was written.
   integer, parameter, public :: FTI_DONE = 1
   !> Nothing to recover.
   integer, parameter, public :: FTI_NREC = -2
   !> The flags of FTI_SetAttribute (accepted for FTI's programs).
   integer, parameter, public :: FTI_ATTRIBUTE_NAME = 1
   integer, parameter, public :: FTI_ATTRIBUTE_DIM = 2

   !> Type handles of the intrinsic types, set by FTI_Init.
   integer, public, protected :: FTI_CHARACTER1 = -1, FTI_COMPLEX4 = -1, &
      FTI_COMPLEX8 = -1, FTI_INTEGER1 = -1, FTI_INTEGER2 = -1, FTI_INTEGER4 = -1, &
      FTI_INTEGER8 = -1, FTI_LOGICAL1 = -1, FTI_LOGICAL2 = -1, FTI_LOGICAL4 = -1, &
      FTI_LOGICAL8 = -1, FTI_REAL4 = -1, FTI_REAL8 = -1

   public :: FTI_Init, FTI_Status, FTI_InitType, FTI_Protect, FTI_GetStoredSize, &
      FTI_Realloc, FTI_Checkpoint, FTI_Snapshot, FTI_Recover, FTI_RecoverVarInit, &
      FTI_RecoverVar, FTI_RecoverVarFinalize, FTI_InitICP, FTI_AddVarICP, &
      FTI_FinalizeICP, FTI_Finalize, FTI_setIDFromString, FTI_getIDFromString, &
      FTI_InitCompositeType, FTI_AddScalarField, FTI_AddVectorField, FTI_SetAttribute

   !> Protects a pointer to a scalar or a contiguous array of an intrinsic
   !> type (id, data, err), or count elements of type tid at a C address
   !> (id, ptr, count, tid, err).
   interface FTI_Protect
      module procedure protect_address, protect_character1, protect_complex4, &
         protect_complex8, protect_integer1, protect_integer2, protect_integer4, &
         protect_integer8, protect_logical1, protect_logical2, protect_logical4, &
         protect_logical8, protect_real4, protect_real8
   end interface FTI_Protect

   !> Names variable id's data set (a string, flag FTI_ATTRIBUTE_NAME) or
   !> gives its dimensions (an integer array, flag FTI_ATTRIBUTE_DIM).
   interface FTI_SetAttribute
      module procedure set_attribute_name, set_attribute_dims8, set_attribute_dims4
   end interface FTI_SetAttribute

   ! FTI's FTIT_attribute: its dimensions, then its name.
   type, bind(c) :: c_attribute
      integer(c_int) :: ndims
      integer(c_int64_t) :: count(32)
      character(kind=c_char) :: name(256)
   end type c_attribute

   !> Reallocates variable id's buffer to its stored size (id, ptr, err).
   interface FTI_Realloc
      module procedure realloc_address
   end interface FTI_Realloc

   ! libfti's C calls.
   interface
      integer(c_int) function c_init(config, comm) bind(c, name='frame_fti_init_fortran')
         import :: c_int, c_char
         character(kind=c_char), intent(in) :: config(*)
         integer(c_int), intent(inout) :: comm
      end function
      subroutine c_handles(handles, long_size) bind(c, name='frame_fti_c_handles')
         import :: c_int
         integer(c_int), intent(out) :: handles(6), long_size
      end subroutine
      integer(c_int) function c_set_attribute(id, attribute, flag) bind(c, name='FTI_SetAttribute')
         import :: c_int, c_attribute
         integer(c_int), value :: id
         type(c_attribute), value :: attribute
         integer(c_int), value :: flag
      end function
      integer(c_int) function c_status() bind(c, name='FTI_Status')
         import :: c_int
      end function
      integer(c_int) function c_init_type(handle, size) bind(c, name='FTI_InitType')
         import :: c_int
         integer(c_int), intent(out) :: handle
         integer(c_int), value :: size
      end function
      integer(c_int) function c_protect(id, ptr, count, tid) bind(c, name='FTI_Protect')
         import :: c_int, c_ptr, c_int64_t
         integer(c_int), value :: id
         type(c_ptr), value :: ptr
         integer(c_int64_t), value :: count
         integer(c_int), value :: tid
      end function
      integer(c_int64_t) function c_stored_size(id) bind(c, name='FTI_GetStoredSize')
         import :: c_int, c_int64_t
         integer(c_int), value :: id
      end function
      type(c_ptr) function c_realloc(id, ptr) bind(c, name='FTI_Realloc')
         import :: c_int, c_ptr
         integer(c_int), value :: id
         type(c_ptr), value :: ptr
      end function
      integer(c_int) function c_checkpoint(id, level) bind(c, name='FTI_Checkpoint')
         import :: c_int
         integer(c_int), value :: id, level
      end function
      integer(c_int) function c_snapshot() bind(c, name='FTI_Snapshot')
         import :: c_int
      end function
      integer(c_int) function c_recover() bind(c, name='FTI_Recover')
         import :: c_int
      end function
      integer(c_int) function c_recover_var_init() bind(c, name='FTI_RecoverVarInit')
         import :: c_int
      end function
      integer(c_int) function c_recover_var(id) bind(c, name='FTI_RecoverVar')
         import :: c_int
         integer(c_int), value :: id
      end function
      integer(c_int) function c_recover_var_finalize() bind(c, name='FTI_RecoverVarFinalize')
         import :: c_int
      end function
      integer(c_int) function c_init_icp(id, level, activate) bind(c, name='FTI_InitICP')
         import :: c_int, c_bool
         integer(c_int), value :: id, level
         logical(c_bool), value :: activate
      end function
      integer(c_int) function c_add_var_icp(id) bind(c, name='FTI_AddVarICP')
         import :: c_int
         integer(c_int), value :: id
      end function
      integer(c_int) function c_finalize_icp() bind(c, name='FTI_FinalizeICP')
         import :: c_int
      end function
      integer(c_int) function c_finalize() bind(c, name='FTI_Finalize')
         import :: c_int
      end function
      integer(c_int) function c_set_id(name) bind(c, name='FTI_setIDFromString')
         import :: c_int, c_char
         character(kind=c_char), intent(in) :: name(*)
      end function
      integer(c_int) function c_get_id(name) bind(c, name='FTI_getIDFromString')
         import :: c_int, c_char
         character(kind=c_char), intent(in) :: name(*)
      end function
      integer(c_int) function c_composite(name, size, group) bind(c, name='FTI_InitCompositeType')
         import :: c_int, c_char, c_size_t, c_ptr
         character(kind=c_char), intent(in) :: name(*)
         integer(c_size_t), value :: size
         type(c_ptr), value :: group
      end function
      integer(c_int) function c_scalar_field(id, name, tid, offset) bind(c, name='FTI_AddScalarField')
         import :: c_int, c_char, c_size_t
         integer(c_int), value :: id
         character(kind=c_char), intent(in) :: name(*)
         integer(c_int), value :: tid
         integer(c_size_t), value :: offset
      end function
      integer(c_int) function c_vector_field(id, name, tid, offset, ndims, dims) &
         bind(c, name='FTI_AddVectorField')
         import :: c_int, c_char, c_size_t
         integer(c_int), value :: id
         character(kind=c_char), intent(in) :: name(*)
         integer(c_int), value :: tid
         integer(c_size_t), value :: offset
         integer(c_int), value :: ndims
         integer(c_int), intent(in) :: dims(*)
      end function
   end interface

contains

   !> Reads config_file, replaces global_comm by the program's communicator
   !> (FTI_COMM_WORLD) and sets the type handles. Collective.
   subroutine FTI_Init(config_file, global_comm, err)
      character(len=*), intent(in) :: config_file
      integer, intent(inout) :: global_comm
      integer, intent(out) :: err
      integer(c_int) :: comm, handles(6), long_size
      comm = int(global_comm, c_int)
      err = int(c_init(trim(config_file)//c_null_char, comm))
      if (err /= FTI_SCES) return
      global_comm = int(comm)
      ! char, short, int, long, float, double: the C types that share a
      ! layout with intrinsic types.
      call c_handles(handles, long_size)
      FTI_CHARACTER1 = int(handles(1))
      FTI_INTEGER1 = int(handles(1))
      FTI_INTEGER2 = int(handles(2))
      FTI_INTEGER4 = int(handles(3))
      FTI_LOGICAL1 = int(handles(1))
      FTI_LOGICAL2 = int(handles(2))
      FTI_LOGICAL4 = int(handles(3))
      if (long_size == 8) then
         FTI_INTEGER8 = int(handles(4))
      else
         FTI_INTEGER8 = FTI_InitType(8_c_size_t)
      end if
      FTI_LOGICAL8 = FTI_INTEGER8
      FTI_REAL4 = int(handles(5))
      FTI_REAL8 = int(handles(6))
      FTI_COMPLEX4 = FTI_InitType(8_c_size_t)
      FTI_COMPLEX8 = FTI_InitType(16_c_size_t)
   end subroutine FTI_Init

   !> 1 on a restart until FTI_Recover (or the first FTI_Snapshot), else 0.
   subroutine FTI_Status(status)
      integer, intent(out) :: status
      status = int(c_status())
   end subroutine FTI_Status

   !> A new type handle for elements of size bytes (FTI_NSCS on failure).
   integer function FTI_InitType(size)
      integer(c_size_t), intent(in) :: size
      integer(c_int) :: handle
      FTI_InitType = FTI_NSCS
      if (size < 1 .or. size > huge(0_c_int)) return
      if (c_init_type(handle, int(size, c_int)) == FTI_SCES) FTI_InitType = int(handle)
   end function FTI_InitType

   !> A composite type of size bytes; its fields describe it (frame stores
   !> its bytes).
   integer function FTI_InitCompositeType(name, size)
      character(len=*), intent(in) :: name
      integer(c_size_t), intent(in) :: size
      FTI_InitCompositeType = int(c_composite(trim(name)//c_null_char, size, c_null_ptr))
   end function FTI_InitCompositeType

   !> A scalar field of type field_tid at offset bytes into complex_tid.
   integer function FTI_AddScalarField(complex_tid, name, field_tid, offset)
      integer, value :: complex_tid, field_tid
      character(len=*), intent(in) :: name
      integer(c_size_t), value :: offset
      FTI_AddScalarField = int(c_scalar_field(int(complex_tid, c_int), &
         trim(name)//c_null_char, int(field_tid, c_int), offset))
   end function FTI_AddScalarField

   !> An array field (ndims dimensions of dim_length) at offset bytes.
   integer function FTI_AddVectorField(complex_tid, name, field_tid, offset, ndims, dim_length)
      integer, value :: complex_tid, field_tid, ndims
      character(len=*), intent(in) :: name
      integer(c_size_t), value :: offset
      integer, intent(in) :: dim_length(*)
      integer(c_int), allocatable :: dims(:)
      FTI_AddVectorField = FTI_NSCS
      if (ndims < 1) return
      dims = int(dim_length(1:ndims), c_int)
      FTI_AddVectorField = int(c_vector_field(int(complex_tid, c_int), &
         trim(name)//c_null_char, int(field_tid, c_int), offset, int(ndims, c_int), dims))
   end function FTI_AddVectorField

   ! What every FTI_Protect form ends in: count elements of tid at ptr.
   subroutine protect_address(id, ptr, count, tid, err)
      integer, intent(in) :: id
      type(c_ptr), value :: ptr
      integer, intent(in) :: count
      integer, intent(in) :: tid
      integer, intent(out) :: err
      err = protect_elements(id, ptr, int(count, c_int64_t), tid)
   end subroutine protect_address

   ! The C call, with the element count in 64 bits.
   integer function protect_elements(id, ptr, count, tid)
      integer, intent(in) :: id, tid
      type(c_ptr), intent(in) :: ptr
      integer(c_int64_t), intent(in) :: count
      protect_elements = int(c_protect(int(id, c_int), ptr, count, int(tid, c_int)))
   end function protect_elements

   ! The address to protect for an array of n elements: none when empty.
   type(c_ptr) function first(address, n)
      type(c_ptr), intent(in) :: address
      integer(c_int64_t), intent(in) :: n
      first = c_null_ptr
      if (n > 0) first = address
   end function first

   ! Refuses a non-contiguous pointer, else protects its elements.
   subroutine protect_checked(id, contiguous, address, n, tid, err)
      integer, intent(in) :: id, tid
      logical, intent(in) :: contiguous
      type(c_ptr), intent(in) :: address
      integer(c_int64_t), intent(in) :: n
      integer, intent(out) :: err
      if (.not. contiguous) then
         write (0, '(a,i0,a)') '[ frame-FTI  Error ] : FTI_Protect: variable ', id, &
            ': the pointer is to a non-contiguous section (protect a contiguous copy)'
         err = FTI_NSCS
         return
      end if
      if (tid < 0) then
         write (0, '(a,i0,a)') '[ frame-FTI  Error ] : FTI_Protect: variable ', id, ': FTI_Init has not run'
         err = FTI_NSCS
         return
      end if
      err = protect_elements(id, first(address, n), n, tid)
   end subroutine protect_checked

   subroutine protect_character1(id, data, err)
      integer, intent(in) :: id
      character(kind=c_char, len=*), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      integer(c_int64_t) :: n
      n = size(data, kind=c_int64_t)*len(data, kind=c_int64_t)
      if (n > 0) then
         call protect_checked(id, is_contiguous(data), c_loc(data), n, FTI_CHARACTER1, err)
      else
         call protect_checked(id, .true., c_null_ptr, n, FTI_CHARACTER1, err)
      end if
   end subroutine protect_character1

   subroutine protect_complex4(id, data, err)
      integer, intent(in) :: id
      complex(4), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_COMPLEX4, err)
   end subroutine protect_complex4

   subroutine protect_complex8(id, data, err)
      integer, intent(in) :: id
      complex(8), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_COMPLEX8, err)
   end subroutine protect_complex8

   subroutine protect_integer1(id, data, err)
      integer, intent(in) :: id
      integer(1), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_INTEGER1, err)
   end subroutine protect_integer1

   subroutine protect_integer2(id, data, err)
      integer, intent(in) :: id
      integer(2), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_INTEGER2, err)
   end subroutine protect_integer2

   subroutine protect_integer4(id, data, err)
      integer, intent(in) :: id
      integer(4), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_INTEGER4, err)
   end subroutine protect_integer4

   subroutine protect_integer8(id, data, err)
      integer, intent(in) :: id
      integer(8), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_INTEGER8, err)
   end subroutine protect_integer8

   subroutine protect_logical1(id, data, err)
      integer, intent(in) :: id
      logical(1), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_LOGICAL1, err)
   end subroutine protect_logical1

   subroutine protect_logical2(id, data, err)
      integer, intent(in) :: id
      logical(2), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_LOGICAL2, err)
   end subroutine protect_logical2

   subroutine protect_logical4(id, data, err)
      integer, intent(in) :: id
      logical(4), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_LOGICAL4, err)
   end subroutine protect_logical4

   subroutine protect_logical8(id, data, err)
      integer, intent(in) :: id
      logical(8), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_LOGICAL8, err)
   end subroutine protect_logical8

   subroutine protect_real4(id, data, err)
      integer, intent(in) :: id
      real(4), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_REAL4, err)
   end subroutine protect_real4

   subroutine protect_real8(id, data, err)
      integer, intent(in) :: id
      real(8), pointer, intent(in) :: data(..)
      integer, intent(out) :: err
      call protect_checked(id, is_contiguous(data), c_loc(data), &
         size(data, kind=c_int64_t), FTI_REAL8, err)
   end subroutine protect_real8

   !> Size in bytes of variable id in the checkpoint to recover (0 if none).
   subroutine FTI_GetStoredSize(id, size)
      integer, intent(in) :: id
      integer(8), intent(out) :: size
      size = int(c_stored_size(int(id, c_int)), 8)
   end subroutine FTI_GetStoredSize

   subroutine realloc_address(id, ptr, err)
      integer, intent(in) :: id
      type(c_ptr), intent(inout) :: ptr
      integer, intent(out) :: err
      ptr = c_realloc(int(id, c_int), ptr)
      err = FTI_SCES
      if (.not. c_associated(ptr)) err = FTI_NSCS
   end subroutine realloc_address

   !> Writes a checkpoint now at level (1 to 4; 5 to 9 as FTI numbers them).
   subroutine FTI_Checkpoint(id, level, err)
      integer, intent(in) :: id, level
      integer, intent(out) :: err
      err = int(c_checkpoint(int(id, c_int), int(level, c_int)))
   end subroutine FTI_Checkpoint

   !> Recovers on the first call of a restart, then checkpoints at the
   !> configured interval (err = FTI_DONE). Collective.
   subroutine FTI_Snapshot(err)
      integer, intent(out) :: err
      err = int(c_snapshot())
   end subroutine FTI_Snapshot

   !> Loads every protected variable on this rank.
   subroutine FTI_Recover(err)
      integer, intent(out) :: err
      err = int(c_recover())
   end subroutine FTI_Recover

   !> Begins recovering variables one by one.
   subroutine FTI_RecoverVarInit(err)
      integer, intent(out) :: err
      err = int(c_recover_var_init())
   end subroutine FTI_RecoverVarInit

   !> Recovers variable id.
   subroutine FTI_RecoverVar(id, err)
      integer, intent(in) :: id
      integer, intent(out) :: err
      err = int(c_recover_var(int(id, c_int)))
   end subroutine FTI_RecoverVar

   !> Ends recovering variables one by one.
   subroutine FTI_RecoverVarFinalize(err)
      integer, intent(out) :: err
      err = int(c_recover_var_finalize())
   end subroutine FTI_RecoverVarFinalize

   !> Begins a checkpoint written variable by variable.
   subroutine FTI_InitICP(id, level, activate, err)
      integer, intent(in) :: id, level
      logical, intent(in) :: activate
      integer, intent(out) :: err
      err = int(c_init_icp(int(id, c_int), int(level, c_int), logical(activate, c_bool)))
   end subroutine FTI_InitICP

   !> Adds variable id to the checkpoint FTI_InitICP began.
   subroutine FTI_AddVarICP(id, err)
      integer, intent(in) :: id
      integer, intent(out) :: err
      err = int(c_add_var_icp(int(id, c_int)))
   end subroutine FTI_AddVarICP

   !> Ends the checkpoint FTI_InitICP began.
   subroutine FTI_FinalizeICP(err)
      integer, intent(out) :: err
      err = int(c_finalize_icp())
   end subroutine FTI_FinalizeICP

   !> Waits for promotions, removes or keeps checkpoints as configured,
   !> writes the restart keys. Collective.
   subroutine FTI_Finalize(err)
      integer, intent(out) :: err
      err = int(c_finalize())
   end subroutine FTI_Finalize

   subroutine set_attribute_name(id, attribute, flag, err)
      integer, intent(in) :: id, flag
      character(len=*), intent(in) :: attribute
      integer, intent(out) :: err
      type(c_attribute) :: a
      integer :: i
      a%ndims = 0
      a%count = 0
      a%name = c_null_char
      do i = 1, min(len_trim(attribute), 255)
         a%name(i) = attribute(i:i)
      end do
      err = int(c_set_attribute(int(id, c_int), a, int(flag, c_int)))
   end subroutine set_attribute_name

   subroutine set_attribute_dims8(id, attribute, flag, err)
      integer, intent(in) :: id, flag
      integer(8), intent(in) :: attribute(:)
      integer, intent(out) :: err
      type(c_attribute) :: a
      err = FTI_NSCS
      if (size(attribute) < 1 .or. size(attribute) > 32) return
      a%ndims = int(size(attribute), c_int)
      a%count = 0
      a%count(1:size(attribute)) = int(attribute, c_int64_t)
      a%name = c_null_char
      err = int(c_set_attribute(int(id, c_int), a, int(flag, c_int)))
   end subroutine set_attribute_dims8

   subroutine set_attribute_dims4(id, attribute, flag, err)
      integer, intent(in) :: id, flag
      integer(4), intent(in) :: attribute(:)
      integer, intent(out) :: err
      call set_attribute_dims8(id, int(attribute, 8), flag, err)
   end subroutine set_attribute_dims4

   !> The variable id for name (given in this session, or the next one).
   subroutine FTI_setIDFromString(name, id)
      character(len=*), intent(in) :: name
      integer, intent(out) :: id
      id = int(c_set_id(trim(name)//c_null_char))
   end subroutine FTI_setIDFromString

   !> The variable id name was given, or -1.
   subroutine FTI_getIDFromString(name, id)
      character(len=*), intent(in) :: name
      integer, intent(out) :: id
      id = int(c_get_id(trim(name)//c_null_char))
   end subroutine FTI_getIDFromString

end module fti
