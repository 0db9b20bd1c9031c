//! Discovery for an EC2NodeClass (v1): subnets, security groups, AMIs and capacity reservations
//! from their selector terms (terms are ORed, the fields of one term ANDed), the placement group
//! its `placementGroupSelector` names, and the instance profile from `role` or
//! `instanceProfile`.

use std::collections::BTreeMap;

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::Filter;
use fleetwright_crds::{EC2NodeClassSpec, PlacementGroupSelector, SelectorTerm};
use tracing::{debug, instrument};

use crate::ami::{self, Ami, AmiFamily};
use crate::clients::AwsClients;
use crate::cluster::ClusterInfo;
use crate::error::AwsError;

pub use fleetwright_cloud::nodeclass::{
    ParameterRoot, ResolvedNodeClass, ResolvedPlacementGroup, ResolvedReservation, Subnet,
};

/// Resolves every selector of an EC2NodeClass.
#[instrument(skip(clients, cluster, spec, root), fields(cluster = %cluster.name))]
pub async fn resolve(
    clients: &AwsClients,
    cluster: &ClusterInfo,
    name: &str,
    spec: &EC2NodeClassSpec,
    root: &ParameterRoot,
    read_only: bool,
) -> Result<ResolvedNodeClass, AwsError> {
    let subnets = subnets(&clients.ec2, name, &spec.subnet_selector_terms).await?;
    let security_groups =
        security_groups(&clients.ec2, name, &spec.security_group_selector_terms).await?;
    let (family, amis) = amis(clients, cluster, name, spec, root).await?;
    let reservations = reservations(
        &clients.ec2,
        name,
        &spec.capacity_reservation_selector_terms,
    )
    .await?;
    let placement_group = match &spec.placement_group_selector {
        Some(selector) => Some(placement_group(&clients.ec2, name, selector).await?),
        None => None,
    };
    let instance_profile = match (&spec.instance_profile, &spec.role) {
        (Some(profile), _) => profile.clone(),
        (None, Some(role)) => {
            crate::instance_profile::ensure(&clients.iam, &cluster.name, role, read_only).await?
        }
        (None, None) => {
            return Err(AwsError::nodeclass(
                name,
                "role",
                "one of role or instanceProfile is required",
            ))
        }
    };
    debug!(
        subnets = subnets.len(),
        security_groups = security_groups.len(),
        amis = amis.len(),
        "resolved nodeclass"
    );
    Ok(ResolvedNodeClass {
        name: name.to_string(),
        family,
        subnets,
        security_groups,
        amis,
        instance_profile,
        reservations,
        placement_group,
    })
}

/// Filters for the tag part of a selector term: `*` matches any value.
fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                Filter::builder().name("tag-key").values(k).build()
            } else {
                Filter::builder().name(format!("tag:{k}")).values(v).build()
            }
        })
        .collect()
}

fn term_is_empty(t: &SelectorTerm) -> bool {
    t.tags.is_empty() && t.id.is_none() && t.name.is_none()
}

async fn subnets(
    ec2: &aws_sdk_ec2::Client,
    nodeclass: &str,
    terms: &[SelectorTerm],
) -> Result<Vec<Subnet>, AwsError> {
    check_terms(nodeclass, "subnetSelectorTerms", terms)?;
    let mut found: BTreeMap<String, Subnet> = BTreeMap::new();
    for term in terms {
        let mut filters = tag_filters(&term.tags);
        if let Some(id) = &term.id {
            filters.push(Filter::builder().name("subnet-id").values(id).build());
        }
        filters.push(Filter::builder().name("state").values("available").build());
        let mut pages = ec2
            .describe_subnets()
            .set_filters(Some(filters))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| crate::error::api("DescribeSubnets", e))?;
            for s in page.subnets() {
                if let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) {
                    found.insert(
                        id.to_string(),
                        Subnet {
                            id: id.to_string(),
                            zone: zone.to_string(),
                            available_ips: s.available_ip_address_count().unwrap_or(0),
                        },
                    );
                }
            }
        }
    }
    non_empty(
        nodeclass,
        "subnetSelectorTerms",
        found.into_values().collect(),
    )
}

/// The active capacity reservations the terms select (by id, or by tags), with the instances
/// each can still take. Reservations whose instance match criteria Karpenter does not know are
/// left out, as Karpenter leaves them.
async fn reservations(
    ec2: &aws_sdk_ec2::Client,
    nodeclass: &str,
    terms: &[SelectorTerm],
) -> Result<Vec<ResolvedReservation>, AwsError> {
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    check_terms(nodeclass, "capacityReservationSelectorTerms", terms)?;
    let mut found: BTreeMap<String, ResolvedReservation> = BTreeMap::new();
    for term in terms {
        let mut filters = tag_filters(&term.tags);
        filters.push(Filter::builder().name("state").values("active").build());
        let mut pages = ec2
            .describe_capacity_reservations()
            .set_capacity_reservation_ids(term.id.clone().map(|id| vec![id]))
            .set_filters(Some(filters))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| crate::error::api("DescribeCapacityReservations", e))?;
            for r in page.capacity_reservations().iter().filter_map(reservation) {
                found.insert(r.id.clone(), r);
            }
        }
    }
    Ok(found.into_values().collect())
}

/// The placement group a `placementGroupSelector` names (by name or id), from
/// DescribePlacementGroups; one EC2 does not know fails the class, naming the selector.
async fn placement_group(
    ec2: &aws_sdk_ec2::Client,
    nodeclass: &str,
    selector: &PlacementGroupSelector,
) -> Result<ResolvedPlacementGroup, AwsError> {
    let wanted = selector
        .id
        .as_ref()
        .or(selector.name.as_ref())
        .ok_or_else(|| {
            AwsError::nodeclass(
                nodeclass,
                "placementGroupSelector",
                "one of name or id is required",
            )
        })?;
    let not_found = || {
        AwsError::nodeclass(
            nodeclass,
            "placementGroupSelector",
            format!("placement group {wanted:?} not found"),
        )
    };
    let answer = ec2
        .describe_placement_groups()
        .set_group_ids(selector.id.clone().map(|id| vec![id]))
        .set_group_names(selector.name.clone().map(|n| vec![n]))
        .send()
        .await;
    let page = match answer {
        Ok(page) => page,
        Err(e) if e.code() == Some("InvalidPlacementGroup.Unknown") => return Err(not_found()),
        Err(e) => return Err(crate::error::api("DescribePlacementGroups", e)),
    };
    let group = page.placement_groups().first().ok_or_else(not_found)?;
    Ok(ResolvedPlacementGroup {
        id: group.group_id().unwrap_or_default().to_string(),
        name: group.group_name().unwrap_or_default().to_string(),
        strategy: group
            .strategy()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        partitions: group.partition_count(),
    })
}

fn reservation(r: &aws_sdk_ec2::types::CapacityReservation) -> Option<ResolvedReservation> {
    let criteria = r.instance_match_criteria()?.as_str().to_string();
    if !["open", "targeted"].contains(&criteria.as_str()) {
        return None;
    }
    Some(ResolvedReservation {
        id: r.capacity_reservation_id()?.to_string(),
        instance_type: r.instance_type()?.to_string(),
        zone: r.availability_zone()?.to_string(),
        kind: r
            .reservation_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_else(|| "default".into()),
        interruptible: r.interruptible().unwrap_or(false),
        owner_id: r.owner_id().unwrap_or_default().to_string(),
        instance_match_criteria: criteria,
        end_time: r
            .end_date()
            .and_then(|t| chrono::DateTime::from_timestamp(t.secs(), t.subsec_nanos())),
        available: r.available_instance_count().unwrap_or(0).max(0) as usize,
    })
}

async fn security_groups(
    ec2: &aws_sdk_ec2::Client,
    nodeclass: &str,
    terms: &[SelectorTerm],
) -> Result<Vec<String>, AwsError> {
    check_terms(nodeclass, "securityGroupSelectorTerms", terms)?;
    let mut found = std::collections::BTreeSet::new();
    for term in terms {
        let mut filters = tag_filters(&term.tags);
        if let Some(id) = &term.id {
            filters.push(Filter::builder().name("group-id").values(id).build());
        }
        if let Some(name) = &term.name {
            filters.push(Filter::builder().name("group-name").values(name).build());
        }
        let mut pages = ec2
            .describe_security_groups()
            .set_filters(Some(filters))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| crate::error::api("DescribeSecurityGroups", e))?;
            found.extend(
                page.security_groups()
                    .iter()
                    .filter_map(|g| g.group_id().map(str::to_string)),
            );
        }
    }
    non_empty(
        nodeclass,
        "securityGroupSelectorTerms",
        found.into_iter().collect(),
    )
}

fn check_terms(nodeclass: &str, field: &str, terms: &[SelectorTerm]) -> Result<(), AwsError> {
    if terms.is_empty() {
        return Err(AwsError::nodeclass(
            nodeclass,
            field,
            "at least one term is required",
        ));
    }
    if let Some(i) = terms.iter().position(term_is_empty) {
        return Err(AwsError::nodeclass(
            nodeclass,
            &format!("{field}[{i}]"),
            "a term needs tags, id or name",
        ));
    }
    Ok(())
}

fn non_empty<T>(nodeclass: &str, field: &str, found: Vec<T>) -> Result<Vec<T>, AwsError> {
    if found.is_empty() {
        return Err(AwsError::nodeclass(
            nodeclass,
            field,
            "no resources match the selector terms",
        ));
    }
    Ok(found)
}

async fn amis(
    clients: &AwsClients,
    cluster: &ClusterInfo,
    nodeclass: &str,
    spec: &EC2NodeClassSpec,
    root: &ParameterRoot,
) -> Result<(AmiFamily, Vec<Ami>), AwsError> {
    let terms = &spec.ami_selector_terms;
    if terms.is_empty() {
        return Err(AwsError::nodeclass(
            nodeclass,
            "amiSelectorTerms",
            "at least one term is required",
        ));
    }
    if let Some(alias) = terms.iter().find_map(|t| t.alias.as_deref()) {
        if terms.len() > 1 {
            return Err(AwsError::nodeclass(
                nodeclass,
                "amiSelectorTerms",
                "an alias term cannot be combined with other terms",
            ));
        }
        let (family, mut params) = ami::alias_parameters(alias, &cluster.kubernetes_version)
            .map_err(|e| AwsError::nodeclass(nodeclass, "amiSelectorTerms[0].alias", e))?;
        for p in &mut params {
            p.path = format!("{}{}", root.0.trim_end_matches('/'), p.path);
        }
        let amis = alias_amis(&clients.ssm, &params).await?;
        return Ok((
            family,
            non_empty(nodeclass, "amiSelectorTerms[0].alias", amis)?,
        ));
    }
    let family = spec
        .ami_family
        .as_deref()
        .and_then(AmiFamily::parse)
        .ok_or_else(|| {
            AwsError::nodeclass(
                nodeclass,
                "amiFamily",
                "must be AL2023, AL2, Bottlerocket or Custom when amiSelectorTerms has no alias",
            )
        })?;
    let mut amis = Vec::new();
    for (i, term) in terms.iter().enumerate() {
        amis.extend(term_amis(clients, nodeclass, i, term).await?);
    }
    amis.sort_by(|a, b| a.id.cmp(&b.id));
    amis.dedup_by(|a, b| a.id == b.id);
    Ok((family, non_empty(nodeclass, "amiSelectorTerms", amis)?))
}

/// Reads the alias's SSM parameters (10 per call); parameters that do not exist (no neuron AMI
/// for arm64, say) are skipped.
async fn alias_amis(
    ssm: &aws_sdk_ssm::Client,
    params: &[ami::AliasParameter],
) -> Result<Vec<Ami>, AwsError> {
    let mut out = Vec::new();
    for chunk in params.chunks(10) {
        let resp = ssm
            .get_parameters()
            .set_names(Some(chunk.iter().map(|p| p.path.clone()).collect()))
            .send()
            .await
            .map_err(|e| crate::error::api("GetParameters", e))?;
        for p in resp.parameters() {
            let Some(param) = chunk.iter().find(|c| Some(c.path.as_str()) == p.name()) else {
                continue;
            };
            if let Some(id) = p.value() {
                out.push(Ami {
                    id: id.to_string(),
                    arch: param.arch.to_string(),
                    variant: Some(param.variant),
                    created: p.last_modified_date().map(|d| d.to_string()),
                });
            }
        }
    }
    Ok(out)
}

async fn term_amis(
    clients: &AwsClients,
    nodeclass: &str,
    index: usize,
    term: &SelectorTerm,
) -> Result<Vec<Ami>, AwsError> {
    let mut request = clients.ec2.describe_images();
    let mut filters = tag_filters(&term.tags);
    let mut id = term.id.clone();
    if let Some(parameter) = &term.ssm_parameter {
        let resp = clients
            .ssm
            .get_parameter()
            .name(parameter)
            .send()
            .await
            .map_err(|e| crate::error::api("GetParameter", e))?;
        id = resp.parameter().and_then(|p| p.value()).map(str::to_string);
    }
    if let Some(id) = &id {
        filters.push(Filter::builder().name("image-id").values(id).build());
    }
    if let Some(name) = &term.name {
        filters.push(Filter::builder().name("name").values(name).build());
        request = match &term.owner {
            Some(owner) => request.owners(owner),
            None => request.owners("self").owners("amazon"),
        };
    } else if let Some(owner) = &term.owner {
        request = request.owners(owner);
    }
    if filters.is_empty() {
        return Err(AwsError::nodeclass(
            nodeclass,
            &format!("amiSelectorTerms[{index}]"),
            "a term needs alias, id, name, tags or ssmParameter",
        ));
    }
    let resp = request
        .set_filters(Some(filters))
        .send()
        .await
        .map_err(|e| crate::error::api("DescribeImages", e))?;
    Ok(resp
        .images()
        .iter()
        .filter_map(|i| {
            let arch = match i.architecture()?.as_str() {
                "x86_64" => "amd64",
                "arm64" => "arm64",
                _ => return None,
            };
            Some(Ami {
                id: i.image_id()?.to_string(),
                arch: arch.to_string(),
                variant: None,
                created: i.creation_date().map(str::to_string),
            })
        })
        .collect())
}
