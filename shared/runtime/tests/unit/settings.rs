use super::*;
use std::collections::BTreeMap;

fn settings(pairs: &[(&str, &str)]) -> Result<Settings, RuntimeError> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::from_lookup(|k| map.get(k).cloned())
}

#[test]
fn defaults_need_only_the_cluster_name() {
    let s = settings(&[("FLEETWRIGHT_CLUSTER_NAME", "dev")]).unwrap();
    assert_eq!(s.namespace, "karpenter");
    assert_eq!(s.lease_duration, Duration::from_secs(DEFAULT_LEASE_SECONDS));
    assert_eq!(s.rebalance, RebalanceAction::Event);
    assert_eq!(s.kube_api, KubeApi::Eks);
    assert!(!s.dry_run);
    assert!(
        s.node_repair == crate::tick::repair::NodeRepair::Off,
        "node repair is off unless set, as in Karpenter"
    );
    let on = settings(&[
        ("FLEETWRIGHT_CLUSTER_NAME", "dev"),
        ("FLEETWRIGHT_NODE_REPAIR", "true"),
    ]);
    assert_eq!(on.unwrap().node_repair, crate::tick::repair::NodeRepair::On);
    let legacy = settings(&[
        ("FLEETWRIGHT_CLUSTER_NAME", "dev"),
        ("FLEETWRIGHT_NODE_REPAIR", "true"),
        ("FLEETWRIGHT_LEGACY_NODE_REPAIR", "true"),
    ]);
    assert_eq!(
        legacy.unwrap().node_repair,
        crate::tick::repair::NodeRepair::Legacy
    );
    let reboot = settings(&[
        ("FLEETWRIGHT_CLUSTER_NAME", "dev"),
        ("FLEETWRIGHT_NODE_REPAIR", "true"),
        ("FLEETWRIGHT_REBOOT_FOR_REPAIR", "true"),
    ]);
    assert_eq!(
        reboot.unwrap().node_repair,
        crate::tick::repair::NodeRepair::Reboot
    );
    let bad = settings(&[
        ("FLEETWRIGHT_CLUSTER_NAME", "dev"),
        ("FLEETWRIGHT_REBOOT_FOR_REPAIR", "maybe"),
    ]);
    assert!(bad
        .unwrap_err()
        .to_string()
        .contains("FLEETWRIGHT_REBOOT_FOR_REPAIR"));
}

/// Settings are logged (and printed in panics) with Debug: the webhook token is not.
#[test]
fn debug_output_redacts_the_webhook_token() {
    let token = "0123456789abcdef-secret";
    let s = settings(&[
        ("FLEETWRIGHT_CLUSTER_NAME", "dev"),
        ("FLEETWRIGHT_WEBHOOK_TOKEN", token),
    ])
    .unwrap();
    let printed = format!("{s:?} {s:#?}");
    assert!(!printed.contains(token), "{printed}");
    assert!(printed.contains("dev") && printed.contains(crate::webhook::REDACTED));
}

#[test]
fn a_bad_scheduler_config_stops_only_what_reads_it() {
    let base = ("FLEETWRIGHT_CLUSTER_NAME", "dev");
    let bad = ("FLEETWRIGHT_SCHEDULER_CONFIG", "podTopologySpread: {defaultConstraints: [{maxSkew: 0, topologyKey: a, whenUnsatisfiable: DoNotSchedule}]}");
    let read = settings(&[base, bad]).expect("the other functions still start");
    let err = read.default_spread().unwrap_err().to_string();
    assert!(
        err.starts_with("setting FLEETWRIGHT_SCHEDULER_CONFIG"),
        "{err}"
    );
    assert!(err.contains("defaultConstraints[0].maxSkew"), "{err}");
    let good = ("FLEETWRIGHT_SCHEDULER_CONFIG", "podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]}");
    assert_eq!(
        settings(&[base, good])
            .unwrap()
            .default_spread()
            .unwrap()
            .len(),
        1
    );
    assert!(settings(&[base])
        .unwrap()
        .default_spread()
        .unwrap()
        .is_empty());
}

#[test]
fn bad_values_name_the_variable() {
    let err = |pairs: &[(&str, &str)]| settings(pairs).unwrap_err().to_string();
    assert!(err(&[]).starts_with("setting FLEETWRIGHT_CLUSTER_NAME"));
    let base = ("FLEETWRIGHT_CLUSTER_NAME", "dev");
    assert!(
        err(&[base, ("FLEETWRIGHT_DRY_RUN", "perhaps")]).starts_with("setting FLEETWRIGHT_DRY_RUN")
    );
    assert!(err(&[base, ("FLEETWRIGHT_NODE_REPAIR", "sometimes")])
        .starts_with("setting FLEETWRIGHT_NODE_REPAIR"));
    assert!(err(&[base, ("FLEETWRIGHT_REBALANCE", "ignore")])
        .starts_with("setting FLEETWRIGHT_REBALANCE"));
    assert!(err(&[base, ("FLEETWRIGHT_MIN_VALUES_POLICY", "Loose")])
        .starts_with("setting FLEETWRIGHT_MIN_VALUES_POLICY"));
    assert!(err(&[base, ("FLEETWRIGHT_LEASE_SECONDS", "5")])
        .starts_with("setting FLEETWRIGHT_LEASE_SECONDS"));
    assert!(err(&[base, ("FLEETWRIGHT_WEBHOOK_TOKEN", "short")])
        .starts_with("setting FLEETWRIGHT_WEBHOOK_TOKEN"));
    let token = ("FLEETWRIGHT_WEBHOOK_TOKEN", "0123456789abcdef");
    let parameter = (
        "FLEETWRIGHT_WEBHOOK_TOKEN_PARAMETER",
        "/fleetwright/dev/token",
    );
    assert!(
        err(&[base, token, parameter]).starts_with("setting FLEETWRIGHT_WEBHOOK_TOKEN_PARAMETER")
    );
    assert_eq!(
        settings(&[base, parameter])
            .unwrap()
            .webhook_token_parameter
            .as_deref(),
        Some("/fleetwright/dev/token")
    );
    assert!(
        err(&[base, ("FLEETWRIGHT_KUBE_API_URL", "http://10.0.0.1:80")])
            .starts_with("setting FLEETWRIGHT_KUBE_API_URL")
    );
    assert!(err(&[base, ("FLEETWRIGHT_CLUSTER_ENDPOINT", "http://x")])
        .starts_with("setting FLEETWRIGHT_CLUSTER_ENDPOINT"));
    for theirs in ["karpenter-leader-election", "cluster-autoscaler"] {
        assert!(err(&[base, ("FLEETWRIGHT_LEASE_NAME", theirs)])
            .starts_with("setting FLEETWRIGHT_LEASE_NAME"));
    }
}
