//! Replays the kept fuzz corpus (`testdata/fuzz/TARGET/`: the seeds, the inputs libFuzzer found
//! new coverage with, minimised, and every input that once crashed) through each target: none
//! may panic. Aborts and hangs would fail the test process itself.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

#[test]
fn every_kept_fuzz_input_is_handled_without_a_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/fuzz");
    let mut failures = Vec::new();
    for (name, target) in mppq_fuzz::TARGETS {
        let dir = root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: no corpus kept for target `{name}`", dir.display());
        for file in &files {
            let data = std::fs::read(file).unwrap();
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                failures.push(file.display().to_string());
            }
        }
        eprintln!("{name}: {} inputs replayed", files.len());
    }
    assert!(failures.is_empty(), "inputs that panic: {failures:#?}");
}
