use super::*;

#[test]
fn codes_round_trip_and_sizes_match_rust_types() {
    for t in ElemType::ALL {
        assert_eq!(ElemType::from_code(t.code()), Some(t));
    }
    assert_eq!(ElemType::from_code(0), None);
    assert_eq!(ElemType::from_code(200), None);
    assert_eq!(ElemType::F64.size(), std::mem::size_of::<f64>());
    assert_eq!(ElemType::I16.size(), std::mem::size_of::<i16>());
    assert_eq!(ElemType::Byte.size(), std::mem::size_of::<Byte>());
}

#[test]
fn vectors_resize_and_fixed_regions_refuse() {
    let mut v = vec![1.5f64; 3];
    assert_eq!(v.load_target(5).map(|b| b.len()), Ok(40));
    assert_eq!(v.len(), 5);
    let mut a = [0u32; 4];
    assert_eq!(a.load_target(3).map(|b| b.len()), Err(4));
    let mut s = 7i64;
    assert_eq!(Region::as_bytes(&s), 7i64.to_ne_bytes());
    assert!(s.load_target(1).is_ok());
    let mut b: Box<[u16]> = vec![1, 2].into_boxed_slice();
    assert_eq!(b.load_target(2).map(|b| b.len()), Ok(4));
    assert_eq!(b.load_target(9).map(|b| b.len()), Err(2));
}
