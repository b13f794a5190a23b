use super::*;

#[test]
fn slice_sink_refuses_out_of_range_windows() {
    let mut buf = [0u8; 8];
    let mut sink = SliceSink::new(&mut buf);
    assert!(sink.window(4, 4).is_ok());
    assert!(sink.window(5, 4).is_err());
    assert!(sink.window(u64::MAX, 1).is_err());
}
