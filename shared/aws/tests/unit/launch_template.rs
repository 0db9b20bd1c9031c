use super::*;

fn spec() -> LaunchTemplateSpec {
    LaunchTemplateSpec {
        image_id: "ami-1".into(),
        user_data: String::new(),
        block_devices: Vec::new(),
        http_endpoint: "enabled".into(),
        http_tokens: "required".into(),
        http_put_response_hop_limit: 1,
        http_protocol_ipv6: "disabled".into(),
        security_groups: vec!["sg-1".into()],
        instance_profile: "profile".into(),
        detailed_monitoring: false,
        associate_public_ip_address: None,
        capacity_reservation: None,
        placement_group: None,
        partition: None,
        network_interfaces: Vec::new(),
        ip_prefix_count: None,
        connection_tracking: None,
        nested_virtualization: None,
        enclaves: false,
        tags: BTreeMap::new(),
    }
}

/// `enclaveOptions.enabled` turns Nitro Enclaves on in the template; off, the template and
/// its name are what they were before the field existed.
#[test]
fn enclave_options_reach_the_template() {
    let plain = spec();
    assert!(request_data(&plain).enclave_options().is_none());
    let mut on = spec();
    on.enclaves = true;
    assert_eq!(
        request_data(&on)
            .enclave_options()
            .and_then(|e| e.enabled()),
        Some(true)
    );
    assert_ne!(on.name("c"), plain.name("c"));
    let json = serde_json::to_string(&plain).unwrap();
    assert!(!json.contains("enclaves"), "{json}");
}

/// The EC2NodeClass's network and placement fields reach the template as Karpenter writes
/// them: the placement group, every network interface (EFA-only ones as such, the public
/// address and the prefixes on the primary), connection tracking, nested virtualization and
/// the capacity reservation it targets; a plain class keeps the security groups on the
/// instance.
#[test]
fn placement_network_interfaces_and_reservations_reach_the_template() {
    let plain = request_data(&spec());
    assert_eq!(plain.security_group_ids(), ["sg-1"]);
    assert!(plain.network_interfaces().is_empty());
    assert!(plain.placement().is_none() && plain.capacity_reservation_specification().is_none());

    let mut s = spec();
    s.placement_group = Some(PlacementGroupSelector {
        name: Some("ml-cluster".into()),
        id: None,
    });
    s.network_interfaces = vec![
        NetworkInterface {
            network_card_index: 0,
            device_index: 0,
            interface_type: "interface".into(),
        },
        NetworkInterface {
            network_card_index: 1,
            device_index: 1,
            interface_type: "efa-only".into(),
        },
    ];
    s.associate_public_ip_address = Some(false);
    s.ip_prefix_count = Some(2);
    s.connection_tracking = Some(ConnectionTracking {
        tcp_established_timeout: Some(600),
        udp_stream_timeout: None,
        udp_timeout: Some(30),
    });
    s.nested_virtualization = Some("enabled".into());
    s.capacity_reservation = Some(("cr-1".into(), true));
    let data = request_data(&s);
    assert_eq!(
        data.placement().and_then(|p| p.group_name()),
        Some("ml-cluster")
    );
    assert_eq!(data.placement().and_then(|p| p.partition_number()), None);
    let named = s.name("c");
    s.partition = Some(2);
    let partitioned = request_data(&s);
    assert_eq!(
        partitioned.placement().and_then(|p| p.partition_number()),
        Some(2)
    );
    assert_ne!(s.name("c"), named, "each partition has its own template");
    assert!(
        data.security_group_ids().is_empty(),
        "groups go on the interfaces"
    );
    let nics = data.network_interfaces();
    assert_eq!(nics.len(), 2);
    assert_eq!(nics[0].associate_public_ip_address(), Some(false));
    assert_eq!(nics[0].ipv4_prefix_count(), Some(2));
    assert_eq!(nics[0].interface_type(), None);
    assert_eq!(nics[1].interface_type(), Some("efa-only"));
    assert_eq!(nics[1].network_card_index(), Some(1));
    assert_eq!(nics[1].associate_public_ip_address(), None);
    assert_eq!(nics[1].ipv4_prefix_count(), None);
    assert!(nics.iter().all(|n| n.groups() == ["sg-1"]));
    let tracking = nics[0].connection_tracking_specification().unwrap();
    assert_eq!(tracking.tcp_established_timeout(), Some(600));
    assert_eq!(tracking.udp_timeout(), Some(30));
    assert_eq!(
        data.cpu_options()
            .and_then(|c| c.nested_virtualization())
            .map(|n| n.as_str()),
        Some("enabled")
    );
    let target = data
        .capacity_reservation_specification()
        .and_then(|c| c.capacity_reservation_target())
        .and_then(|t| t.capacity_reservation_id());
    assert_eq!(target, Some("cr-1"));
    assert_eq!(
        data.instance_market_options()
            .and_then(|m| m.market_type())
            .map(|m| m.as_str()),
        Some("capacity-block")
    );
    assert_ne!(
        spec().name("c"),
        s.name("c"),
        "a changed field is a new template"
    );
}
