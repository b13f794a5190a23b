use super::*;

#[test]
fn raw_region_reads_and_writes_caller_memory() {
    let mut data = [1.0f64, 2.0];
    // SAFETY: `data` outlives `raw` and is not touched while `raw` is used.
    let mut raw = unsafe { RawRegion::new(data.as_mut_ptr().cast(), 2, ElemType::F64) };
    assert_eq!(raw.as_bytes().len(), 16);
    assert_eq!(raw.load_target(3).err(), Some(2));
    let target = raw.load_target(2).expect("same count");
    target.copy_from_slice(zerocopy::IntoBytes::as_bytes(&[3.0f64, 4.0][..]));
    assert_eq!(data, [3.0, 4.0]);
}

#[test]
fn empty_raw_region_needs_no_pointer() {
    // SAFETY: a null pointer with a zero count is allowed.
    let mut raw = unsafe { RawRegion::new(std::ptr::null_mut(), 0, ElemType::U8) };
    assert!(raw.as_bytes().is_empty());
    assert_eq!(raw.load_target(0).map(|b| b.len()), Ok(0));
}
