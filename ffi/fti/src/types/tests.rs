use super::*;

#[test]
fn basic_handles_have_their_c_sizes() {
    let sizes = [
        1,
        2,
        4,
        std::mem::size_of::<c_long>(),
        1,
        2,
        4,
        std::mem::size_of::<c_long>(),
        4,
        8,
        16,
    ];
    for (i, size) in sizes.iter().enumerate() {
        assert_eq!(
            layout(i as fti_id_t + 1).unwrap().width,
            *size,
            "handle {}",
            i + 1
        );
    }
    assert!(layout(0).is_err() && layout(12).is_err() && layout(-1).is_err());
}

#[test]
fn registered_types_are_bytes_of_their_size() {
    let mut t: fti_id_t = 0;
    // SAFETY: a live handle to write to, or null (refused).
    assert_eq!(unsafe { FTI_InitType(&mut t, 24) }, FTI_SCES);
    let l = layout(t).unwrap();
    assert_eq!(
        (l.elem, l.width, l.elements(3)),
        (ElemType::Byte, 24, Some(72))
    );
    // SAFETY: a live handle to write to, or null (refused).
    assert_eq!(unsafe { FTI_InitType(&mut t, 0) }, crate::FTI_NSCS);
    assert_eq!(
        // SAFETY: a live handle to write to, or null (refused).
        unsafe { FTI_InitType(std::ptr::null_mut(), 8) },
        crate::FTI_NSCS
    );
    assert!(layout(t + 1).is_err());
}
