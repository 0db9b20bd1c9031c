//! The `webhook` binary refuses to start without its required settings, naming the variable; a
//! Lambda init failure is then visible in the function's logs. (This test also makes
//! `cargo test --workspace --all-targets` build the executable that `scripts/e2e.sh` runs.)

#[test]
fn a_missing_cluster_name_fails_init_naming_the_variable() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_webhook"))
        .env_clear()
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run the binary");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("FLEETWRIGHT_CLUSTER_NAME"), "{stderr}");
}

/// A webhook with no token would answer every caller of its public Function URL: it refuses to
/// start, naming the setting, unless `FLEETWRIGHT_WEBHOOK_UNAUTHENTICATED=true` asks for that.
#[test]
fn a_webhook_without_a_token_refuses_to_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_webhook"))
        .env_clear()
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("FLEETWRIGHT_CLUSTER_NAME", "dev")
        .output()
        .expect("run the binary");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("FLEETWRIGHT_WEBHOOK_TOKEN_PARAMETER") && stderr.contains("every caller"),
        "{stderr}"
    );
    assert!(
        stderr.contains("FLEETWRIGHT_WEBHOOK_UNAUTHENTICATED"),
        "{stderr}"
    );
}
