//! Stamps the commit the CLI was built from into `fleetwright --version`, so that a bug report
//! says which code it is about. Outside a git checkout (a crate tarball), the commit is unknown.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown commit".to_string());
    println!("cargo:rustc-env=FLEETWRIGHT_COMMIT={commit}");
    // A new commit moves HEAD's branch ref (or HEAD itself, detached).
    for path in ["../.git/HEAD", "../.git/refs/heads", "../.git/packed-refs"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
