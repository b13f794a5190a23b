//! SCR's Fortran calls (`scrf.h`): each C call as a subroutine of the
//! same name, lower case with a trailing underscore as gfortran and most
//! Fortran compilers name them, its arguments by reference and an integer
//! `ierror` last, then the hidden lengths of its character arguments.
//! Fortran strings are blank-padded, not NUL-terminated: names are trimmed
//! on the way in, and paths blank-padded on the way out (an error when one
//! does not fit the program's variable).

use crate::restart::MAX_FILENAME;
use crate::status::{guard, Failure, SCR_FAILURE, SCR_SUCCESS};
use std::ffi::{c_char, c_int};

/// A name for a C call, NUL-terminated in a buffer on the stack: nothing
/// to drop, as the C call may leave through the program's error handler
/// (see `frame_interface::entry::leave`).
struct CName([u8; MAX_FILENAME]);

impl CName {
    fn as_ptr(&self) -> *const c_char {
        self.0.as_ptr().cast()
    }

    /// The name without its NUL, as text.
    fn to_str(&self) -> Result<&str, std::str::Utf8Error> {
        let end = self.0.iter().position(|b| *b == 0).unwrap_or(0);
        std::str::from_utf8(&self.0[..end])
    }
}

/// The Fortran string of `len` bytes at `text`, without its trailing
/// blanks, as a C string (`None` when it holds a NUL or is too long).
///
/// # Safety
/// `text` points to `len` bytes.
unsafe fn from_fortran(text: *const c_char, len: usize) -> Option<CName> {
    if text.is_null() {
        return None;
    }
    // SAFETY: the compiler passes the variable and its length.
    let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len) };
    let end = bytes.iter().rposition(|b| *b != b' ').map_or(0, |i| i + 1);
    if end >= MAX_FILENAME || bytes[..end].contains(&0) {
        return None;
    }
    let mut name = CName([0; MAX_FILENAME]);
    name.0[..end].copy_from_slice(&bytes[..end]);
    Some(name)
}

/// Writes the C string in `from` (a buffer of `MAX_FILENAME` bytes) into
/// the Fortran variable `to` of `len` bytes, blank-padded; false when it
/// does not fit.
///
/// # Safety
/// `to` points to `len` writable bytes.
unsafe fn to_fortran(from: &[u8; MAX_FILENAME], to: *mut c_char, len: usize) -> bool {
    let text = from
        .iter()
        .position(|b| *b == 0)
        .map_or(&from[..], |n| &from[..n]);
    if to.is_null() || text.len() > len {
        return false;
    }
    // SAFETY: the variable has `len` bytes, and the text fits.
    let out = unsafe { std::slice::from_raw_parts_mut(to.cast::<u8>(), len) };
    out[..text.len()].copy_from_slice(text);
    out[text.len()..].fill(b' ');
    true
}

/// Stores `code` into `*ierror`.
///
/// # Safety
/// `ierror` points to an integer.
unsafe fn set(ierror: *mut c_int, code: c_int) {
    if !ierror.is_null() {
        // SAFETY: as the caller promises.
        unsafe { *ierror = code };
    }
}

/// A call without arguments.
macro_rules! plain {
    ($name:ident => $call:path) => {
        #[doc = concat!("`", stringify!($name), "(ierror)` of `scrf.h`.")]
        ///
        /// # Safety
        /// `ierror` points to an integer.
        #[no_mangle]
        pub unsafe extern "C" fn $name(ierror: *mut c_int) {
            let code = $call();
            // SAFETY: as the caller promises.
            unsafe { set(ierror, code) }
        }
    };
}

/// A call that sets a flag.
macro_rules! flag {
    ($name:ident => $call:path) => {
        #[doc = concat!("`", stringify!($name), "(flag, ierror)` of `scrf.h`.")]
        ///
        /// # Safety
        /// `flag` and `ierror` point to integers.
        #[no_mangle]
        pub unsafe extern "C" fn $name(flag: *mut c_int, ierror: *mut c_int) {
            let code = $call(flag);
            // SAFETY: as the caller promises.
            unsafe { set(ierror, code) }
        }
    };
}

/// A call that takes `valid`.
macro_rules! valid {
    ($name:ident => $call:path) => {
        #[doc = concat!("`", stringify!($name), "(valid, ierror)` of `scrf.h`.")]
        ///
        /// # Safety
        /// `valid` and `ierror` point to integers.
        #[no_mangle]
        pub unsafe extern "C" fn $name(valid: *const c_int, ierror: *mut c_int) {
            let valid = match valid.is_null() {
                true => 0,
                // SAFETY: checked non-null; the program passes an integer.
                false => unsafe { *valid },
            };
            let code = $call(valid);
            // SAFETY: as the caller promises.
            unsafe { set(ierror, code) }
        }
    };
}

plain!(scr_init_ => crate::init::SCR_Init);
plain!(scr_finalize_ => crate::init::SCR_Finalize);
plain!(scr_start_checkpoint_ => crate::output::SCR_Start_checkpoint);
flag!(scr_need_checkpoint_ => crate::output::SCR_Need_checkpoint);
flag!(scr_should_exit_ => crate::output::SCR_Should_exit);
valid!(scr_complete_checkpoint_ => crate::output::SCR_Complete_checkpoint);
valid!(scr_complete_output_ => crate::output::SCR_Complete_output);
valid!(scr_complete_restart_ => crate::restart::SCR_Complete_restart);

/// `scr_start_output(name, flags, ierror)`.
///
/// # Safety
/// `name` has `name_len` bytes; the integers are passed by reference.
#[no_mangle]
pub unsafe extern "C" fn scr_start_output_(
    name: *const c_char,
    flags: *const c_int,
    ierror: *mut c_int,
    name_len: usize,
) {
    // SAFETY: as the caller promises.
    unsafe {
        let code = match from_fortran(name, name_len) {
            Some(n) => crate::output::SCR_Start_output(n.as_ptr(), *flags),
            None => SCR_FAILURE,
        };
        set(ierror, code);
    }
}

/// `scr_route_file(name, file, ierror)`.
///
/// # Safety
/// `name` has `name_len` bytes and `file` `file_len`; `ierror` points to
/// an integer.
#[no_mangle]
pub unsafe extern "C" fn scr_route_file_(
    name: *const c_char,
    file: *mut c_char,
    ierror: *mut c_int,
    name_len: usize,
    file_len: usize,
) {
    let mut out = [0u8; MAX_FILENAME];
    // SAFETY: as the caller promises; `out` has MAX_FILENAME bytes.
    unsafe {
        let code = match from_fortran(name, name_len) {
            Some(n) => crate::restart::SCR_Route_file(n.as_ptr(), out.as_mut_ptr().cast()),
            None => SCR_FAILURE,
        };
        let fits = code != SCR_SUCCESS || to_fortran(&out, file, file_len);
        set(ierror, if fits { code } else { SCR_FAILURE });
    }
}

/// `scr_have_restart(flag, name, ierror)`.
///
/// # Safety
/// `name` has `name_len` bytes; the integers are passed by reference.
#[no_mangle]
pub unsafe extern "C" fn scr_have_restart_(
    flag: *mut c_int,
    name: *mut c_char,
    ierror: *mut c_int,
    name_len: usize,
) {
    let mut out = [0u8; MAX_FILENAME];
    // SAFETY: as the caller promises; `out` has MAX_FILENAME bytes.
    unsafe {
        let code = crate::restart::SCR_Have_restart(flag, out.as_mut_ptr().cast());
        let fits = code != SCR_SUCCESS || *flag == 0 || to_fortran(&out, name, name_len);
        set(ierror, if fits { code } else { SCR_FAILURE });
    }
}

/// `scr_start_restart(name, ierror)`.
///
/// # Safety
/// `name` has `name_len` bytes; `ierror` points to an integer.
#[no_mangle]
pub unsafe extern "C" fn scr_start_restart_(
    name: *mut c_char,
    ierror: *mut c_int,
    name_len: usize,
) {
    let mut out = [0u8; MAX_FILENAME];
    // SAFETY: as the caller promises; `out` has MAX_FILENAME bytes.
    unsafe {
        let code = crate::restart::SCR_Start_restart(out.as_mut_ptr().cast());
        let fits = code != SCR_SUCCESS || to_fortran(&out, name, name_len);
        set(ierror, if fits { code } else { SCR_FAILURE });
    }
}

/// A call that takes one name.
macro_rules! named {
    ($name:ident => $call:path) => {
        #[doc = concat!("`", stringify!($name), "(name, ierror)` of `scrf.h`.")]
        ///
        /// # Safety
        /// `name` has `name_len` bytes; `ierror` points to an integer.
        #[no_mangle]
        pub unsafe extern "C" fn $name(name: *const c_char, ierror: *mut c_int, name_len: usize) {
            // SAFETY: as the caller promises.
            unsafe {
                let code = match from_fortran(name, name_len) {
                    Some(n) => $call(n.as_ptr()),
                    None => SCR_FAILURE,
                };
                set(ierror, code);
            }
        }
    };
}

named!(scr_current_ => crate::restart::SCR_Current);
named!(scr_drop_ => crate::restart::SCR_Drop);
named!(scr_delete_ => crate::restart::SCR_Delete);

/// `scr_config(config, value, ierror)`: sets a parameter (`"KEY=VALUE"`),
/// or reads one (`"KEY"`) into `value`, blank-padded (all blanks when it
/// is unset).
///
/// # Safety
/// `config` has `config_len` bytes and `value` `value_len`; `ierror`
/// points to an integer.
#[no_mangle]
pub unsafe extern "C" fn scr_config_(
    config: *const c_char,
    value: *mut c_char,
    ierror: *mut c_int,
    config_len: usize,
    value_len: usize,
) {
    let code = guard("scr_config", || {
        // SAFETY: as the caller promises.
        let text = unsafe { from_fortran(config, config_len) }
            .ok_or_else(|| Failure::new("the parameter holds a NUL or is too long"))?;
        let text = text
            .to_str()
            .map_err(|_| Failure::new("the parameter is not UTF-8"))?;
        let Some(found) = crate::init::config(text)? else {
            return Ok(());
        };
        let mut out = [0u8; MAX_FILENAME];
        let bytes = found.unwrap_or_default().into_bytes();
        let n = bytes.len().min(MAX_FILENAME - 1);
        out[..n].copy_from_slice(&bytes[..n]);
        // SAFETY: as the caller promises.
        match unsafe { to_fortran(&out, value, value_len) } {
            true => Ok(()),
            false => Err(Failure::new(format!(
                "the value of {text} does not fit the variable ({value_len} characters)"
            ))),
        }
    });
    // SAFETY: as the caller promises.
    unsafe { set(ierror, code) }
}
