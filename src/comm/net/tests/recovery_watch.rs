//! The recovery watch a socket communicator hands out.

use super::world;
use crate::comm::RuntimeLink;

/// A rank's recovery watch says when the runtime starts a recovery into a
/// newer epoch than the communicator's, and only then.
#[test]
fn the_recovery_watch_sees_only_newer_epochs() {
    let w = world(1, false);
    let comm = w.comm(0, 3);
    let watch = comm.recovery_watch();
    assert_eq!(watch.started(), None);
    w.hubs[0].interrupt(3);
    assert_eq!(
        watch.started(),
        None,
        "a recovery into the rank's own epoch"
    );
    w.hubs[0].interrupt(4);
    assert_eq!(watch.started(), Some(4));
    assert_eq!(watch.clone().started(), Some(4));
    assert_eq!(crate::comm::Standalone.recovery_watch().started(), None);
}
