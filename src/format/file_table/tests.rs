use super::*;

#[test]
fn an_entry_is_in_exactly_one_place_of_frames_own() {
    assert_eq!(Entry::region("a", FIRST).place(), Ok(Place::Region(FIRST)));
    assert_eq!(Entry::held("a", 7).place(), Ok(Place::Held(7)));
    let both = Entry {
        name: "a".into(),
        region: Some(FIRST),
        held: Some(7),
    };
    assert!(both.place().unwrap_err().to_string().contains("not both"));
    let neither = Entry {
        name: "a".into(),
        region: None,
        held: None,
    };
    assert!(neither.place().unwrap_err().to_string().contains("neither"));
    for id in [0, FIRST - 1, TABLE, RegionId::MAX] {
        let err = Entry::region("a", id).place().unwrap_err().to_string();
        assert!(err.contains("not one of frame's"), "{id}: {err}");
    }
}

#[test]
fn the_table_round_trips_and_refuses_unknown_keys() {
    let table = vec![Entry::region("x.bin", FIRST), Entry::held("y.bin", 0)];
    let bytes = encode(&table);
    let back: Vec<Entry> = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back, table);
    assert_eq!(held(&table), vec![("y.bin".to_string(), 0)]);
    let text = String::from_utf8(bytes).unwrap();
    assert!(!text.contains("null"), "absent places are left out: {text}");
    let odd = br#"[{"name": "x", "held": 1, "extra": 2}]"#;
    assert!(serde_json::from_slice::<Vec<Entry>>(odd).is_err());
}
