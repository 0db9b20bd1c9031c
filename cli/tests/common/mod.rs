//! Helpers the CLI's integration tests share: running the built binary, fixtures, temp files.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `fleetwright` with `args`.
pub fn fleetwright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleetwright"))
        .args(args)
        .env("FLEETWRIGHT_LOG", "info")
        .output()
        .expect("run fleetwright")
}

/// A path under `cli/tests/fixtures`.
pub fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// A path from the repository root.
pub fn repo(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
        .display()
        .to_string()
}

/// Writes `text` to a file in this test process's directory under cargo's `target/tmp` (so
/// `cargo clean` takes it, and nothing is left in the system's temp directory); returns its path.
pub fn write_temp(name: &str, text: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fleetwright-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Stdout as text, after checking the command succeeded.
pub fn success(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}; stderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}
