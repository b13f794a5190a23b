use super::*;
use crate::types::layout;
use std::ffi::CString;

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

#[test]
fn a_composite_type_is_bytes_of_its_size_and_its_fields_must_fit() {
    // SAFETY: NUL-terminated names and arrays that outlive the call.
    let t = unsafe { FTI_InitCompositeType(c("particle").as_ptr(), 40, std::ptr::null_mut()) };
    assert!(t >= 100, "handle {t}");
    assert_eq!(layout(t).unwrap().width, 40);
    let dbl = 10;
    // A double at 0, three doubles at 8: 32 bytes of 40.
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_AddScalarField(t, c("mass").as_ptr(), dbl, 0) },
        FTI_SCES
    );
    let dims = [3];
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_AddVectorField(t, c("pos").as_ptr(), dbl, 8, 1, dims.as_ptr()) },
        FTI_SCES
    );
    // The same name again, a field past the end, an unknown field type,
    // a handle that is not composite, bad dimensions: each refused.
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_AddScalarField(t, c("mass").as_ptr(), dbl, 32) },
        FTI_NSCS
    );
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_AddScalarField(t, c("tail").as_ptr(), dbl, 33) },
        FTI_NSCS
    );
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_AddScalarField(t, c("odd").as_ptr(), 99, 0) },
        FTI_NSCS
    );
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_AddScalarField(dbl, c("x").as_ptr(), dbl, 0) },
        FTI_NSCS
    );
    let bad = [2, -1];
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_AddVectorField(t, c("v").as_ptr(), dbl, 0, 2, bad.as_ptr()) },
        FTI_NSCS
    );
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_AddVectorField(t, c("w").as_ptr(), dbl, 0, 0, dims.as_ptr()) },
        FTI_NSCS
    );
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_AddVectorField(t, c("huge").as_ptr(), dbl, usize::MAX, 1, dims.as_ptr()) },
        FTI_NSCS
    );
    // Of no size, or with no name: no type.
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_InitCompositeType(c("empty").as_ptr(), 0, std::ptr::null_mut()) },
        FTI_NSCS
    );
    assert_eq!(
        // SAFETY: NUL-terminated names and arrays that outlive the call.
        unsafe { FTI_InitCompositeType(std::ptr::null(), 8, std::ptr::null_mut()) },
        FTI_NSCS
    );
}
