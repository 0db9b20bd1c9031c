use super::*;

#[test]
fn dns_ip_is_the_tenth_address() {
    assert_eq!(cluster_dns_ip("10.100.0.0/16").unwrap(), "10.100.0.10");
    assert_eq!(cluster_dns_ip("172.20.0.0/16").unwrap(), "172.20.0.10");
    assert_eq!(cluster_dns_ip("fd00:1234::/108").unwrap(), "fd00:1234::a");
    assert!(cluster_dns_ip("nonsense").is_none());
}
