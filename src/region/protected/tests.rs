use super::*;

#[test]
fn busy_region_is_reported_not_waited_for() {
    let p = Protected::new(vec![1u8, 2, 3]);
    let erased = p.erased();
    {
        let _w = p.write();
        assert!(erased.try_read().is_none());
        assert!(erased.try_write().is_none());
    }
    {
        let _r = p.read();
        assert!(erased.try_read().is_some());
        assert!(erased.try_write().is_none());
    }
    let held = erased.try_read().expect("free region");
    assert_eq!(held.region().as_bytes(), &[1, 2, 3]);
}

#[test]
fn restoring_through_the_registry_is_seen_by_the_handle() {
    let p = Protected::new(vec![0.0f32; 2]);
    let mut reg = Registry::default();
    reg.insert(4, p.erased());
    let mut held = reg.get(4).and_then(|r| r.try_write()).expect("free region");
    let bytes = held.region_mut().load_target(3).expect("vec resizes");
    bytes.copy_from_slice(zerocopy::IntoBytes::as_bytes(&[1.0f32, 2.0, 3.0][..]));
    drop(held);
    assert_eq!(*p.read(), vec![1.0, 2.0, 3.0]);
    assert!(reg.remove(4));
    assert_eq!(reg.len(), 0);
}
