use super::*;
use crate::comm::LocalComm;

#[test]
fn slices_travel_and_reduce_for_every_type() {
    let out = LocalComm::run(3, 3, |c| {
        let r = c.rank();
        let next = (r + 1) % 3;
        let prev = (r + 2) % 3;
        let mut got = [0u16; 5];
        c.sendrecv(&[r as u16; 5], next, &mut got, prev, 1).unwrap();
        let mut mins = [r as i8 - 1, 5];
        c.all_reduce(&mut mins, ReduceOp::Min).unwrap();
        let mut sums = [0.5f32 * r as f32];
        c.all_reduce(&mut sums, ReduceOp::Sum).unwrap();
        let mut maxes = [r as u64, 7];
        c.all_reduce(&mut maxes, ReduceOp::Max).unwrap();
        let bad = c.all_reduce(&mut [1.0f32], ReduceOp::And).is_err();
        (got, mins, sums, maxes, bad)
    });
    for (r, o) in out.into_iter().enumerate() {
        let (got, mins, sums, maxes, bad) = o.unwrap();
        assert_eq!(got, [((r + 2) % 3) as u16; 5]);
        assert_eq!(mins, [-1, 5]);
        assert_eq!(sums, [1.5]);
        assert_eq!(maxes, [2, 7]);
        assert!(bad);
    }
}

#[test]
fn a_message_of_the_wrong_length_is_refused_with_its_sender() {
    let out = LocalComm::run(2, 2, |c| {
        if c.rank() == 0 {
            c.send_slice(1, 3, &[1.0f64, 2.0, 3.0]).unwrap();
            None
        } else {
            let mut two = [0.0f64; 2];
            Some(c.recv_into(0, 3, &mut two).unwrap_err().to_string())
        }
    });
    let msg = out[1].as_ref().unwrap().clone().unwrap();
    assert!(msg.contains("rank 0 sent 24 bytes, expected 16"), "{msg}");
}
