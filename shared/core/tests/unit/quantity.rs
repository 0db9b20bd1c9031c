use super::*;

#[test]
fn parses_cpu() {
    assert_eq!(parse_cpu_millis("100m").unwrap(), 100);
    assert_eq!(parse_cpu_millis("1.5").unwrap(), 1500);
    assert_eq!(parse_cpu_millis("2").unwrap(), 2000);
    assert_eq!(parse_cpu_millis("0.1").unwrap(), 100);
    assert!(parse_cpu_millis("1e3m").is_err());
    assert_eq!(parse_cpu_millis("1e-3").unwrap(), 1);
    assert_eq!(parse_cpu_millis("250u").unwrap(), 1);
}

#[test]
fn parses_bytes() {
    assert_eq!(parse_units("512Mi").unwrap(), 512 << 20);
    assert_eq!(parse_units("2Gi").unwrap(), 2 << 30);
    assert_eq!(parse_units("1G").unwrap(), 1_000_000_000);
    assert_eq!(parse_units("1k").unwrap(), 1000);
    assert_eq!(parse_units("12e6").unwrap(), 12_000_000);
    assert!(parse_units("12 apples").is_err());
    assert!(parse_units("").is_err());
}

#[test]
fn formats() {
    assert_eq!(format_cpu(1500), "1500m");
    assert_eq!(format_cpu(2000), "2");
    assert_eq!(format_bytes(512 << 20), "512Mi");
    assert_eq!(format_bytes(2 << 30), "2Gi");
}
