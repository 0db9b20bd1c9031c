//! The harness refuses to run outside `scripts/e2e.sh`, naming what is missing. (This test also
//! makes `cargo test --workspace --all-targets` build the `fleetwright-e2e` executable.)

#[test]
fn without_the_emulator_port_the_harness_names_the_variable() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fleetwright-e2e"))
        .arg("check")
        .env_remove("FLEETWRIGHT_LAMBDA_PORT")
        .output()
        .expect("run the harness");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("FLEETWRIGHT_LAMBDA_PORT"), "{stderr}");
}
