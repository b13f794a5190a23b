use super::*;
use std::sync::{Arc, Mutex};

/// Standard error as a buffer.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What `emit` prints in `style`.
fn printed(style: Style, emit: impl FnOnce()) -> String {
    let buffer = Buffer::default();
    let out = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new("debug"))
        .with_writer(move || out.clone())
        .with_ansi(false)
        .event_format(Line { style })
        .finish();
    tracing::subscriber::with_default(subscriber, emit);
    let bytes = buffer.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

fn events() {
    tracing::info!(level = 2, checkpoint = 5, "recovery planned");
    tracing::warn!("level 3 failed: node 2 is gone");
    tracing::error!(rank = 1, "cannot write");
    tracing::debug!("a detail");
}

#[test]
fn plain_lines_carry_no_timestamp_or_module_path() {
    let text = printed(Style::Plain, events);
    assert_eq!(
        text,
        "frame: recovery planned level=2 checkpoint=5\n\
         frame: warning: level 3 failed: node 2 is gone\n\
         frame: error: cannot write rank=1\n\
         frame: debug: a detail\n"
    );
}

#[test]
fn fti_lines_name_their_level_in_brackets() {
    let text = printed(Style::Fti, events);
    assert_eq!(
        text,
        "[ frame-FTI  Information ] : recovery planned level=2 checkpoint=5\n\
         [ frame-FTI  Warning ] : level 3 failed: node 2 is gone\n\
         [ frame-FTI  Error ] : cannot write rank=1\n\
         [ frame-FTI  Debug ] : a detail\n"
    );
}
