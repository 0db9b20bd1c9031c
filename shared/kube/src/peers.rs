//! Other node autoscalers in the cluster. Fleetwright and Karpenter (or Cluster Autoscaler)
//! acting on one cluster at once would each take the other's nodes for garbage: Karpenter's fresh
//! instances have no Fleetwright NodeClaim yet, and the reverse. Each holds a leader-election
//! Lease while it runs, so a live one means: do not act.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::Client;

/// The leader-election Leases of the autoscalers Fleetwright must not run beside: (namespace,
/// name, who). Karpenter's is `karpenter-leader-election` in the namespace it runs in (most
/// often `kube-system` or `karpenter`); Cluster Autoscaler's is `cluster-autoscaler`.
pub fn known_leases(namespace: &str) -> Vec<(String, &'static str, &'static str)> {
    let mut namespaces = vec!["kube-system".to_string(), "karpenter".to_string()];
    if !namespaces.iter().any(|n| n == namespace) {
        namespaces.push(namespace.to_string());
    }
    let mut out = Vec::new();
    for ns in namespaces {
        out.push((ns.clone(), "karpenter-leader-election", "Karpenter"));
        out.push((ns, "cluster-autoscaler", "Cluster Autoscaler"));
    }
    out
}

/// Whether a Lease is held at `now` (Unix seconds): a holder, renewed within its duration.
pub fn held(lease: &Lease, now: i64) -> bool {
    let Some(spec) = &lease.spec else {
        return false;
    };
    if spec
        .holder_identity
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        return false;
    }
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0.as_second());
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    renewed.is_some_and(|r| now <= r + duration)
}

/// The other autoscaler holding its Lease now (`Karpenter (kube-system/karpenter-leader-election,
/// held by …)`), if one does. A Lease that cannot be read (not there, or not allowed) says
/// nothing.
pub async fn active_autoscaler(client: Client, namespace: &str, now: i64) -> Option<String> {
    for (ns, name, who) in known_leases(namespace) {
        let api: Api<Lease> = Api::namespaced(client.clone(), &ns);
        let lease = match api.get_opt(name).await {
            Ok(Some(lease)) => lease,
            Ok(None) => continue,
            Err(e) => {
                tracing::debug!(namespace = %ns, lease = name, error = %e, "could not read another autoscaler's lease");
                continue;
            }
        };
        if held(&lease, now) {
            let holder = lease
                .spec
                .and_then(|s| s.holder_identity)
                .unwrap_or_default();
            return Some(format!("{who} ({ns}/{name}, held by {holder})"));
        }
    }
    None
}

#[cfg(test)]
#[path = "../tests/unit/peers.rs"]
mod tests;
