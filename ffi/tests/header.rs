//! `ffi/include/frame.h` is what cbindgen makes of the sources now.
//! Regenerate it with `FRAME_UPDATE_HEADER=1 cargo test -p frame-ffi --test header`.

use std::path::Path;

#[test]
fn the_checked_in_header_is_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    let path = dir.join("include/frame.h");
    if std::env::var_os("FRAME_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &out).expect("write frame.h");
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == out,
        "ffi/include/frame.h is out of date: run FRAME_UPDATE_HEADER=1 cargo test -p frame-ffi --test header"
    );
}
