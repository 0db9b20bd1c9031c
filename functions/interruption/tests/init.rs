//! The `interruption` binary refuses to start without its required settings, naming the variable; a
//! Lambda init failure is then visible in the function's logs. (This test also makes
//! `cargo test --workspace --all-targets` build the executable that `scripts/e2e.sh` runs.)

#[test]
fn a_missing_cluster_name_fails_init_naming_the_variable() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_interruption"))
        .env_clear()
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run the binary");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("FLEETWRIGHT_CLUSTER_NAME"), "{stderr}");
}
