use super::*;

fn global(dims: &[u64]) -> Global {
    Global {
        name: "grid".into(),
        dims: dims.to_vec(),
        width: 8,
        recovered_dims: false,
    }
}

#[test]
fn a_subset_must_lie_inside_its_data_set_with_as_many_dimensions() {
    let g = global(&[10, 20]);
    let inside = Subset {
        did: 0,
        offset: vec![5, 0],
        count: vec![5, 20],
    };
    assert!(check_subset(&g, &inside).is_ok());
    assert_eq!(inside.elements(), Some(100));
    let past = Subset {
        did: 0,
        offset: vec![6, 0],
        count: vec![5, 20],
    };
    assert!(check_subset(&g, &past)
        .unwrap_err()
        .message
        .contains("dimension 0"));
    let flat = Subset {
        did: 0,
        offset: vec![0],
        count: vec![10],
    };
    assert!(check_subset(&g, &flat).is_err());
    let overflow = Subset {
        did: 0,
        offset: vec![u64::MAX, 0],
        count: vec![2, 1],
    };
    assert!(check_subset(&g, &overflow).is_err());
    assert_eq!(global(&[u64::MAX, 4]).bytes(), None);
}

#[test]
fn dimensions_come_from_the_caller_checked() {
    let dims = [3u64, 4];
    assert_eq!(
        // SAFETY: holds what `sizes` reads; a bad count or null is refused first.
        unsafe { sizes(2, dims.as_ptr(), "dims", true) }.unwrap(),
        vec![3, 4]
    );
    let zero = [3u64, 0];
    // SAFETY: holds what `sizes` reads; a bad count or null is refused first.
    assert!(unsafe { sizes(2, zero.as_ptr(), "dims", true) }.is_err());
    // SAFETY: holds what `sizes` reads; a bad count or null is refused first.
    assert!(unsafe { sizes(2, zero.as_ptr(), "offsets", false) }.is_ok());
    // SAFETY: holds what `sizes` reads; a bad count or null is refused first.
    assert!(unsafe { sizes(0, dims.as_ptr(), "dims", true) }.is_err());
    // SAFETY: holds what `sizes` reads; a bad count or null is refused first.
    assert!(unsafe { sizes(33, dims.as_ptr(), "dims", true) }.is_err());
    // SAFETY: holds what `sizes` reads; a bad count or null is refused first.
    assert!(unsafe { sizes::<u64>(2, std::ptr::null(), "dims", true) }.is_err());
    let negative = [3i32, -1];
    // SAFETY: holds what `sizes` reads; a bad count or null is refused first.
    assert!(unsafe { sizes(2, negative.as_ptr(), "dims", true) }.is_err());
}
