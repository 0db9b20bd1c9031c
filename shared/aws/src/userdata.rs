//! User data for each AMI family, as Karpenter writes it:
//! - AL2023: a MIME multipart whose last part is a `node.eks.aws/v1alpha1` NodeConfig;
//! - Bottlerocket: TOML `settings.kubernetes`, merged over the user's TOML;
//! - AL2: a MIME multipart ending with an `/etc/eks/bootstrap.sh` script.
//!
//! The user's own user data comes first (MIME parts) or is merged (TOML); the cluster fields
//! Fleetwright sets always win.

use std::collections::BTreeMap;

use fleetwright_core::catalog::{
    resolve_kubelet, KubeletExpressions, KubeletSettings, RawInstanceType,
};
use fleetwright_core::model::Taint;
use fleetwright_crds::{KubeletConfiguration, MaxPods};
use serde_json::{json, Map, Value};

use crate::cluster::ClusterInfo;

/// The MIME boundary Karpenter uses.
pub const BOUNDARY: &str = "//";

/// Everything a node needs to join the cluster with the right labels and taints.
#[derive(Clone, Debug)]
pub struct NodeBootstrap<'a> {
    pub cluster: &'a ClusterInfo,
    pub labels: &'a BTreeMap<String, String>,
    /// Taints and startup taints, including `karpenter.sh/unregistered:NoExecute`.
    pub taints: &'a [Taint],
    pub kubelet: Option<&'a KubeletConfiguration>,
    /// The EC2NodeClass's `userData`, if any.
    pub custom: Option<&'a str>,
}

/// A user-data document that cannot be merged.
#[derive(Debug, thiserror::Error)]
#[error("userData: {0}")]
pub struct UserDataError(pub String);

impl NodeBootstrap<'_> {
    fn dns(&self) -> Vec<String> {
        self.kubelet
            .and_then(|k| k.cluster_dns.clone())
            .filter(|d| !d.is_empty())
            .or_else(|| self.cluster.dns_ip().map(|ip| vec![ip]))
            .unwrap_or_default()
    }

    fn labels_flag(&self) -> String {
        self.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn taints_flag(&self) -> String {
        self.taints
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A count: expressions were evaluated for the instance type before (see [`evaluated`]).
    fn max_pods(&self) -> Option<i64> {
        self.kubelet.and_then(|k| k.max_pods.as_ref()?.count())
    }
}

/// Whether the kubelet settings hold a CEL expression (Karpenter v1.15's `NodeClassCEL`): their
/// values then differ by instance type.
pub fn has_expressions(kubelet: &KubeletConfiguration) -> Result<bool, UserDataError> {
    Ok(!expressions(kubelet)?.is_empty())
}

fn expressions(kubelet: &KubeletConfiguration) -> Result<KubeletExpressions, UserDataError> {
    KubeletExpressions::read(
        kubelet.max_pods.as_ref().and_then(MaxPods::expression),
        kubelet.kube_reserved.as_ref(),
        kubelet.system_reserved.as_ref(),
    )
    .map_err(|e| UserDataError(e.to_string()))
}

/// The kubelet settings a node of `raw`'s type gets: each CEL expression replaced by its value
/// for the type, as the plan sized the type (`maxPods` as a count, a reservation as the
/// quantity Karpenter writes, rounded up); a reservation that does not evaluate is left out, so
/// the node keeps its default, as Karpenter leaves it out. Never an expression: the kubelet
/// could not read one.
pub fn evaluated(
    kubelet: &KubeletConfiguration,
    raw: &RawInstanceType,
) -> Result<KubeletConfiguration, UserDataError> {
    let expressions = expressions(kubelet)?;
    if expressions.is_empty() {
        return Ok(kubelet.clone());
    }
    let settings = KubeletSettings {
        max_pods: kubelet.max_pods.as_ref().and_then(MaxPods::count),
        pods_per_core: kubelet.pods_per_core,
        expressions,
        ..Default::default()
    };
    let resolved = resolve_kubelet(raw, &settings, false)
        .map_err(|e| UserDataError(format!("kubelet: {e}")))?;
    let mut out = kubelet.clone();
    if let Some(count) = resolved.max_pods {
        out.max_pods = Some(MaxPods::Count(count));
    }
    replace_expressions(&mut out.kube_reserved, &resolved.kube_reserved);
    replace_expressions(&mut out.system_reserved, &resolved.system_reserved);
    Ok(out)
}

/// A reservation map with its expressions taken out and their values put in.
fn replace_expressions(
    map: &mut Option<BTreeMap<String, String>>,
    values: &BTreeMap<String, String>,
) {
    if let Some(m) = map.as_mut() {
        m.retain(|_, v| fleetwright_core::catalog::is_quantity(v));
        m.extend(values.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

// ---- AL2023 ----

/// AL2023 user data: the user's parts, then the generated NodeConfig.
pub fn al2023(b: &NodeBootstrap) -> Result<String, UserDataError> {
    let mut parts = user_parts(b.custom, "application/node.eks.aws")?;
    let config =
        serde_yaml::to_string(&node_config(b)).map_err(|e| UserDataError(e.to_string()))?;
    parts.push(Part {
        content_type: "application/node.eks.aws".into(),
        body: format!("# Fleetwright generated NodeConfig\n{config}"),
    });
    Ok(mime(&parts))
}

fn node_config(b: &NodeBootstrap) -> Value {
    let mut kubelet = Map::new();
    kubelet.insert("clusterDNS".into(), json!(b.dns()));
    if let Some(max) = b.max_pods() {
        kubelet.insert("maxPods".into(), json!(max));
    }
    if let Some(k) = b.kubelet {
        kubelet_extras(k, &mut kubelet);
    }
    let taints: Vec<Value> = b
        .taints
        .iter()
        .map(|t| {
            let mut v = json!({"key": t.key, "effect": format!("{:?}", t.effect)});
            if !t.value.is_empty() {
                v["value"] = json!(t.value);
            }
            v
        })
        .collect();
    kubelet.insert("registerWithTaints".into(), json!(taints));
    json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": {
                "name": b.cluster.name,
                "apiServerEndpoint": b.cluster.endpoint,
                "certificateAuthority": b.cluster.certificate_authority,
                "cidr": b.cluster.service_cidr,
            },
            "kubelet": {
                "config": kubelet,
                "flags": [format!("--node-labels={}", b.labels_flag())],
            },
        },
    })
}

/// The kubelet settings beyond maxPods and clusterDNS, in KubeletConfiguration's field names.
fn kubelet_extras(k: &KubeletConfiguration, out: &mut Map<String, Value>) {
    let maps = [
        ("kubeReserved", &k.kube_reserved),
        ("systemReserved", &k.system_reserved),
        ("evictionHard", &k.eviction_hard),
        ("evictionSoft", &k.eviction_soft),
        ("evictionSoftGracePeriod", &k.eviction_soft_grace_period),
    ];
    for (name, value) in maps {
        if let Some(v) = value {
            out.insert(name.into(), json!(v));
        }
    }
    let numbers = [
        ("podsPerCore", k.pods_per_core),
        ("evictionMaxPodGracePeriod", k.eviction_max_pod_grace_period),
        (
            "imageGCHighThresholdPercent",
            k.image_gc_high_threshold_percent,
        ),
        (
            "imageGCLowThresholdPercent",
            k.image_gc_low_threshold_percent,
        ),
    ];
    for (name, value) in numbers {
        if let Some(v) = value {
            out.insert(name.into(), json!(v));
        }
    }
    if let Some(quota) = k.cpu_cfs_quota {
        out.insert("cpuCFSQuota".into(), json!(quota));
    }
    // Any other upstream KubeletConfiguration field reaches nodeadm as written (Karpenter v1.15's
    // schemaless `spec.kubelet`); what Fleetwright sets itself (taints, DNS, maxPods) stays its own.
    for (name, value) in &k.extra {
        out.entry(name.clone()).or_insert_with(|| value.clone());
    }
}

// ---- AL2 ----

/// AL2 user data: the user's parts, then a bootstrap.sh script.
pub fn al2(b: &NodeBootstrap) -> Result<String, UserDataError> {
    let mut parts = user_parts(b.custom, "text/x-shellscript; charset=\"us-ascii\"")?;
    let mut extra = vec![format!("--node-labels={:?}", b.labels_flag())];
    if !b.taints.is_empty() {
        extra.push(format!("--register-with-taints={:?}", b.taints_flag()));
    }
    if let Some(max) = b.max_pods() {
        extra.push(format!("--max-pods={max}"));
    }
    if let Some(k) = b.kubelet {
        extra.extend(kubelet_flags(k));
    }
    let mut script = String::from(
        "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n",
    );
    script.push_str(&format!(
        "/etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}' --b64-cluster-ca '{}' \\\n",
        b.cluster.name, b.cluster.endpoint, b.cluster.certificate_authority
    ));
    if let Some(dns) = b.dns().first() {
        script.push_str(&format!("--dns-cluster-ip '{dns}' \\\n"));
    }
    if b.max_pods().is_some() {
        script.push_str("--use-max-pods false \\\n");
    }
    script.push_str(&format!("--kubelet-extra-args '{}'", extra.join(" ")));
    parts.push(Part {
        content_type: "text/x-shellscript; charset=\"us-ascii\"".into(),
        body: script,
    });
    Ok(mime(&parts))
}

/// Kubelet flags for the reservations and eviction thresholds (`--eviction-hard=memory.available<5%`).
fn kubelet_flags(k: &KubeletConfiguration) -> Vec<String> {
    let joined = |map: &BTreeMap<String, String>, sep: &str| {
        map.iter()
            .map(|(k, v)| format!("{k}{sep}{v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut out = Vec::new();
    for (flag, map, sep) in [
        ("kube-reserved", &k.kube_reserved, "="),
        ("system-reserved", &k.system_reserved, "="),
        ("eviction-hard", &k.eviction_hard, "<"),
        ("eviction-soft", &k.eviction_soft, "<"),
        (
            "eviction-soft-grace-period",
            &k.eviction_soft_grace_period,
            "=",
        ),
    ] {
        if let Some(map) = map.as_ref().filter(|m| !m.is_empty()) {
            out.push(format!("--{flag}={:?}", joined(map, sep)));
        }
    }
    if let Some(pods) = k.pods_per_core {
        out.push(format!("--pods-per-core={pods}"));
    }
    out
}

// ---- Bottlerocket ----

/// Bottlerocket user data: the user's TOML with `settings.kubernetes` filled in.
pub fn bottlerocket(b: &NodeBootstrap) -> Result<String, UserDataError> {
    let mut doc: toml::Table = match b.custom {
        Some(text) if !text.trim().is_empty() => text
            .parse()
            .map_err(|e| UserDataError(format!("not valid Bottlerocket TOML: {e}")))?,
        _ => toml::Table::new(),
    };
    let settings = table_at(&mut doc, "settings")?;
    let k8s = table_at(settings, "kubernetes")?;
    let s = |v: &str| toml::Value::String(v.to_string());
    k8s.insert("cluster-name".into(), s(&b.cluster.name));
    k8s.insert("api-server".into(), s(&b.cluster.endpoint));
    k8s.insert(
        "cluster-certificate".into(),
        s(&b.cluster.certificate_authority),
    );
    if let Some(dns) = b.dns().first() {
        k8s.entry("cluster-dns-ip").or_insert_with(|| s(dns));
    }
    if let Some(max) = b.max_pods() {
        k8s.insert("max-pods".into(), toml::Value::Integer(max));
    }
    let labels = table_at(k8s, "node-labels")?;
    for (k, v) in b.labels {
        labels.insert(k.clone(), s(v));
    }
    let taints = table_at(k8s, "node-taints")?;
    for t in b.taints {
        let entry = format!("{}:{:?}", t.value, t.effect);
        let list = taints
            .entry(t.key.clone())
            .or_insert_with(|| toml::Value::Array(Vec::new()));
        if let toml::Value::Array(items) = list {
            if !items.iter().any(|i| i.as_str() == Some(&entry)) {
                items.push(s(&entry));
            }
        }
    }
    if let Some(k) = b.kubelet {
        for (name, value) in [
            ("kube-reserved", &k.kube_reserved),
            ("system-reserved", &k.system_reserved),
            ("eviction-hard", &k.eviction_hard),
        ] {
            if let Some(map) = value {
                let t = table_at(k8s, name)?;
                for (key, v) in map {
                    t.insert(key.clone(), s(v));
                }
            }
        }
    }
    toml::to_string(&doc).map_err(|e| UserDataError(e.to_string()))
}

fn table_at<'t>(
    parent: &'t mut toml::Table,
    key: &str,
) -> Result<&'t mut toml::Table, UserDataError> {
    parent
        .entry(key.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .ok_or_else(|| UserDataError(format!("`{key}` must be a TOML table")))
}

// ---- MIME ----

#[derive(Clone, Debug, PartialEq, Eq)]
struct Part {
    content_type: String,
    body: String,
}

fn mime(parts: &[Part]) -> String {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for p in parts {
        out.push_str(&format!(
            "--{BOUNDARY}\nContent-Type: {}\n\n{}\n\n",
            p.content_type,
            p.body.trim_end()
        ));
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}

/// The user's user data as MIME parts. A MIME document is split into its parts; anything else is
/// one part, typed by its first line (`#!` script, `#cloud-config`, or `fallback`).
fn user_parts(custom: Option<&str>, fallback: &str) -> Result<Vec<Part>, UserDataError> {
    let Some(text) = custom.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(Vec::new());
    };
    if let Some(boundary) = mime_boundary(text) {
        return split_mime(text, &boundary);
    }
    let content_type = if text.starts_with("#!") {
        "text/x-shellscript; charset=\"us-ascii\""
    } else if text.starts_with("#cloud-config") {
        "text/cloud-config; charset=\"us-ascii\""
    } else {
        fallback
    };
    Ok(vec![Part {
        content_type: content_type.into(),
        body: text.to_string(),
    }])
}

fn mime_boundary(text: &str) -> Option<String> {
    let headers = text.split("\n\n").next()?;
    let line = headers.lines().find(|l| {
        l.to_ascii_lowercase()
            .starts_with("content-type: multipart/")
    })?;
    let at = line.find("boundary=")? + "boundary=".len();
    Some(line[at..].trim().trim_matches('"').to_string())
}

fn split_mime(text: &str, boundary: &str) -> Result<Vec<Part>, UserDataError> {
    let text = text.replace("\r\n", "\n");
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    for chunk in text.split(&delimiter).skip(1) {
        if chunk.starts_with("--") {
            break;
        }
        let chunk = chunk.trim_start_matches('\n');
        let (headers, body) = chunk.split_once("\n\n").ok_or_else(|| {
            UserDataError("a MIME part has no blank line after its headers".into())
        })?;
        let content_type = headers
            .lines()
            .find_map(|l| {
                l.split_once(':')
                    .filter(|(name, _)| name.eq_ignore_ascii_case("content-type"))
                    .map(|(_, v)| v.trim().to_string())
            })
            .ok_or_else(|| UserDataError("a MIME part has no Content-Type".into()))?;
        parts.push(Part {
            content_type,
            body: body.trim_end().to_string(),
        });
    }
    if parts.is_empty() {
        return Err(UserDataError(format!(
            "MIME document has no parts with boundary {boundary:?}"
        )));
    }
    Ok(parts)
}

#[cfg(test)]
#[path = "../tests/unit/userdata.rs"]
mod tests;
