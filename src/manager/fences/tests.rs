use super::*;

const fn at(launch: u64, epoch: u64) -> Option<Fence> {
    Some(Fence { launch, epoch })
}

#[test]
fn copies_of_an_older_epoch_or_run_are_refused() {
    let f = Fences::default();
    assert!(f.admit("j", at(10, 1)).is_ok());
    f.note("j", at(10, 2));
    let why = f.admit("j", at(10, 1)).unwrap_err().to_string();
    assert!(
        why.contains("epoch 1") && why.contains("moved on to epoch 2"),
        "{why}"
    );
    let why = f.admit("j", at(9, 7)).unwrap_err().to_string();
    assert!(why.contains("of a later run"), "{why}");
    assert!(f.admit("j", at(10, 2)).is_ok());
    // A newer one moves the fence on; another job is apart; no fence,
    // no check.
    assert!(f.admit("j", at(11, 1)).is_ok());
    assert!(f.admit("j", at(10, 2)).is_err());
    assert!(f.admit("other", at(1, 1)).is_ok());
    assert!(f.admit("j", None).is_ok());
}

#[test]
fn a_manager_tracks_a_bounded_number_of_jobs() {
    let f = Fences::default();
    for j in 0..(MAX_JOBS as u64 * 2) {
        f.note(&format!("job-{j:04}"), at(1, j));
    }
    assert_eq!(f.newest.lock().unwrap().len(), MAX_JOBS);
}
