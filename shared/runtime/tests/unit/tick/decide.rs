use super::*;
use serde_json::json;

fn dump(ca_bundle: Option<&str>) -> ClusterDump {
    let pool = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"metadata": {"labels": {"team": "web"}},
                "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                         "requirements": [], "expireAfter": "720h"}}}});
    let class = json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}]}});
    ClusterDump {
        nodepools: vec![serde_json::from_value(pool).unwrap()],
        nodeclasses: vec![serde_json::from_value(class).unwrap()],
        ca_bundle: ca_bundle.map(str::to_string),
        ..Default::default()
    }
}

fn claim(name: &str, annotations: &[(&str, &str)], drifted: bool) -> NodeClaim {
    let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    let conditions = if drifted {
        json!([{"type": conditions::DRIFTED, "status": "True", "reason": "AMIDrift"}])
    } else {
        json!([])
    };
    serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}, "annotations": annotations},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"conditions": conditions}}))
        .unwrap()
}

fn stamped(actions: &[Action], name: &str) -> BTreeMap<String, String> {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Restamp {
                nodeclaim,
                annotations,
            } if nodeclaim == name => Some(annotations.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// A launch of one of the tick's pools is polled for until its node initializes, for at most
/// [`JOIN_POLL_FOR`]; another pool's NodeClaim, an initialized one and one being deleted are
/// not.
#[test]
fn the_tick_polls_for_its_own_launches_until_they_initialize() {
    let now = Utc::now();
    let launched = |name: &str, age: i64, initialized: bool, pool: &str| -> NodeClaim {
        let mut c = claim(name, &[], false);
        c.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(now.timestamp() - age).unwrap(),
        ));
        c.metadata.labels = Some([(NODEPOOL.to_string(), pool.to_string())].into());
        let status = c.status.get_or_insert_with(Default::default);
        status.provider_id = Some("aws:///us-east-1a/i-0123456789abcdef0".into());
        if initialized {
            c = serde_json::from_value({
                let mut v = serde_json::to_value(&c).unwrap();
                v["status"]["conditions"] =
                    json!([{"type": conditions::INITIALIZED, "status": "True"}]);
                v
            })
            .unwrap();
        }
        c
    };
    let pools = vec!["default".to_string()];
    assert!(joining(
        &[launched("new", 30, false, "default")],
        &pools,
        now
    ));
    assert!(!joining(
        &[launched("ready", 30, true, "default")],
        &pools,
        now
    ));
    assert!(!joining(
        &[launched("theirs", 30, false, "karpenter")],
        &pools,
        now
    ));
    let old = JOIN_POLL_FOR.num_seconds() + 1;
    assert!(!joining(
        &[launched("slow", old, false, "default")],
        &pools,
        now
    ));
    let mut leaving = launched("leaving", 30, false, "default");
    leaving.metadata.deletion_timestamp = leaving.metadata.creation_timestamp.clone();
    assert!(!joining(&[leaving], &pools, now));
}

/// Karpenter's hash controllers' rule, for every way a NodeClaim can carry another version:
/// the hash is replaced only when the NodeClaim had not drifted under the one it carries.
#[test]
fn restamping_keeps_a_drifted_nodeclaims_old_hash_under_the_new_version() {
    let dump = dump(Some("Y2E="));
    let pool = &dump.nodepools[0];
    let class = &dump.nodeclasses[0];
    let pool_hash = convert::template_hash(pool).unwrap();
    let class_hash = convert::node_class_hash(class, "Y2E=").unwrap();
    let legacy = convert::legacy_template_hash(pool);
    let claims = vec![
        claim(
            "current",
            &[
                (NODEPOOL_HASH, &pool_hash),
                (NODEPOOL_HASH_VERSION, "v3"),
                (NODECLASS_HASH, &class_hash),
                (NODECLASS_HASH_VERSION, CLASS_HASH_VERSION),
            ],
            false,
        ),
        claim("bare", &[], false),
        claim(
            "legacy",
            &[
                (NODEPOOL_HASH, &legacy),
                (NODEPOOL_HASH_VERSION, LEGACY_HASH_VERSION),
            ],
            false,
        ),
        claim(
            "legacy-drifted",
            &[
                (NODEPOOL_HASH, "0123abcd"),
                (NODEPOOL_HASH_VERSION, LEGACY_HASH_VERSION),
            ],
            false,
        ),
        claim(
            "karpenter-v1-14-drifted",
            &[(NODECLASS_HASH, "42"), (NODECLASS_HASH_VERSION, "v5")],
            true,
        ),
    ];
    let actions = restamps(&dump, &claims);
    assert!(stamped(&actions, "current").is_empty());
    let both: BTreeMap<String, String> = [
        (NODEPOOL_HASH, pool_hash.as_str()),
        (NODEPOOL_HASH_VERSION, "v3"),
        (NODECLASS_HASH, class_hash.as_str()),
        (NODECLASS_HASH_VERSION, CLASS_HASH_VERSION),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(stamped(&actions, "bare"), both);
    assert_eq!(stamped(&actions, "legacy"), both);
    let only_pool_version = stamped(&actions, "legacy-drifted");
    assert_eq!(only_pool_version[NODEPOOL_HASH_VERSION], "v3");
    assert!(!only_pool_version.contains_key(NODEPOOL_HASH));
    let karpenter = stamped(&actions, "karpenter-v1-14-drifted");
    assert_eq!(karpenter[NODECLASS_HASH_VERSION], CLASS_HASH_VERSION);
    assert!(!karpenter.contains_key(NODECLASS_HASH));
    assert_eq!(karpenter[NODEPOOL_HASH_VERSION], "v3");
    assert!(!karpenter.contains_key(NODEPOOL_HASH));

    // A fleet that all needs re-stamping is re-stamped a tick's share at a time.
    let many: Vec<NodeClaim> = (0..MAX_MARKS_PER_TICK + 5)
        .map(|i| claim(&format!("bare-{i}"), &[], false))
        .collect();
    assert_eq!(restamps(&dump, &many).len(), MAX_MARKS_PER_TICK);

    // Without the cluster's CA bundle the EC2NodeClass hash cannot be Karpenter's: it waits.
    let unknown = restamps(&super::tests::dump(None), &claims);
    assert!(!stamped(&unknown, "bare").contains_key(NODECLASS_HASH));
    assert_eq!(stamped(&unknown, "bare")[NODEPOOL_HASH], pool_hash);
}

/// A NodeClaim launched for a GPU is not initialized until its node advertises the GPU (the
/// device plugin registers it after the node is Ready), as Karpenter waits for every requested
/// resource.
#[test]
fn a_nodeclaim_waits_for_the_resources_it_was_launched_for() {
    let claim: NodeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "gpu-1"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [], "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}},
    }))
    .unwrap();
    let node = |gpus: &str| -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "3920m", "nvidia.com/gpu": gpus},
                "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap()
    };
    assert!(!node_initialized(&node("0"), &claim, false));
    assert!(node_initialized(&node("1"), &claim, false));
}

/// A Ready node that still carries a taint Karpenter knows to be ephemeral (the node lifecycle
/// controller's, the cloud provider's `uninitialized`, the Node Readiness Controller's) is not
/// initialized yet, as Karpenter's `KnownEphemeralTaintsRemoved` holds; a taint of the user's
/// own does not hold it back.
#[test]
fn a_node_with_a_known_ephemeral_taint_is_not_initialized() {
    let claim: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "c1"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []},
    }))
    .unwrap();
    let node = |key: &str, effect: &str| -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": key, "effect": effect}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap()
    };
    for (key, effect) in [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        (
            "node.cloudprovider.kubernetes.io/uninitialized",
            "NoSchedule",
        ),
        ("readiness.k8s.io/network", "NoSchedule"),
    ] {
        assert!(
            !node_initialized(&node(key, effect), &claim, false),
            "{key}:{effect}"
        );
    }
    assert!(node_initialized(&node("team", "NoSchedule"), &claim, false));
}
