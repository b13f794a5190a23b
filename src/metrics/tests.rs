use super::*;

#[test]
fn every_record_names_its_event_and_reads_back() {
    let promotion = Record::Promotion(PromotionRecord {
        job: "j".into(),
        checkpoint: 3,
        level: 2,
        node: 1,
        ok: true,
        micros: 10,
        bytes_in: 4,
        bytes_out: 4,
        error: None,
    });
    let line = String::from_utf8(promotion.to_line()).unwrap();
    assert!(line.starts_with(r#"{"event":"promotion","#), "{line}");
    assert_eq!(Record::parse(&line), Some(promotion));
    let runtime = RuntimeRecoveryRecord {
        failure: 1,
        mode: "online".into(),
        kind: "node".into(),
        epoch: 2,
        failed_ranks: vec![2, 3],
        failed_nodes: vec![1],
        detected_ns: 1_000_000,
        reinit_sent_ns: 2_000_000,
        replacements_started_ns: 3_000_000,
        barrier_ns: 0,
        fallback: None,
        runtime_recovery_ms: 0.0,
        silent_ms: Some(5200.0),
        threshold_ms: Some(5000.0),
        ..RuntimeRecoveryRecord::default()
    };
    let mut closed = runtime.clone();
    closed.close(5_000_000);
    assert_eq!(closed.runtime_recovery_ms, 4.0);
    let line = String::from_utf8(Record::RuntimeRecovery(closed.clone()).to_line()).unwrap();
    assert!(line.contains(r#""event":"runtime_recovery""#), "{line}");
    // As runtimes wrote it before the event had a name.
    let untagged = serde_json::to_string(&closed).unwrap();
    assert_eq!(
        Record::parse(&untagged),
        Some(Record::RuntimeRecovery(closed))
    );
    assert_eq!(Record::parse(r#"{"event":"other","x":1}"#), None);
    assert_eq!(Record::parse("not json"), None);
}
