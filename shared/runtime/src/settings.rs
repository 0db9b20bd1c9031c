//! Settings, read once from the environment at cold start and validated; a bad value fails
//! initialisation with a message naming the variable. The README's settings table documents them.

use std::time::Duration;

use crate::error::RuntimeError;

pub use fleetwright_core::model::{MinValuesPolicy, TerminateFirst};
pub use fleetwright_kube::interruption::RebalanceAction;

/// How the functions reach the Kubernetes API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KubeApi {
    /// The EKS endpoint and CA from `eks:DescribeCluster`, with an IAM token.
    Eks,
    /// A given EKS endpoint and CA (skips DescribeCluster), with an IAM token.
    Endpoint { url: String, ca: Option<String> },
    /// A plain URL with no authentication: local stacks and tests only.
    Plain { url: String },
}

/// The tick Lease's default term. The tick function's timeout is 60 s and a tick starts no
/// action within [`crate::deadline::MARGIN`] (15 s) of it, so its last action starts by 45 s,
/// and the call it starts with ends within 10 s, by 55 s. The term covers that, and stays under
/// the 60-s schedule, so a tick cut off before releasing the Lease holds back no scheduled tick
/// (only nudges in between). The tick's reserved concurrency of 1 is the other guard against
/// two ticks at once.
pub const DEFAULT_LEASE_SECONDS: u64 = 55;

/// Every setting of the three functions. Debug shows the webhook token redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct Settings {
    pub cluster_name: String,
    /// Namespace of the tick Lease and the state ConfigMap.
    pub namespace: String,
    pub lease_name: String,
    pub lease_duration: Duration,
    /// Plan and log, but create, launch, drain and terminate nothing.
    pub dry_run: bool,
    pub rebalance: RebalanceAction,
    /// The webhook answers only on `/admit/<token>` when set (a local setting; deployments use
    /// `webhook_token_parameter`).
    pub webhook_token: Option<String>,
    /// The SSM SecureString parameter holding the webhook token, read once per container.
    pub webhook_token_parameter: Option<String>,
    /// The EventBridge bus nudges are put on.
    pub event_bus: String,
    pub kube_api: KubeApi,
    /// A mirror root for the EKS AMI SSM parameters (empty: the public ones).
    pub ssm_parameter_root: String,
    /// How `minValues` hold when too few types are left (Karpenter's `MIN_VALUES_POLICY`).
    pub min_values_policy: MinValuesPolicy,
    /// Replace nodes unhealthy past their toleration (Karpenter's `NodeRepair` feature gate;
    /// off unless set), as v1.15 does (rebooting the faults a reboot clears with
    /// `FLEETWRIGHT_REBOOT_FOR_REPAIR`, Karpenter's `RebootForRepair` gate) or, with
    /// `FLEETWRIGHT_LEGACY_NODE_REPAIR`, as before it.
    pub node_repair: crate::tick::repair::NodeRepair,
    /// Evaluate CEL expressions in EC2NodeClass `kubelet` settings (Karpenter v1.15's
    /// `NodeClassCEL` feature gate; off unless set, as Karpenter's is).
    pub node_class_cel: bool,
    /// Delete a static NodePool's drifted (`FLEETWRIGHT_TERMINATE_FIRST_DRIFT`) or unhealthy
    /// (`FLEETWRIGHT_TERMINATE_FIRST_REPAIR`) node before its replacement when the pool is at
    /// its `limits.nodes` (Karpenter v1.15's `TerminateFirstDrift` and `TerminateFirstRepair`
    /// gates; off unless set, as Karpenter's are: the node is then kept, reported blocked).
    pub terminate_first: TerminateFirst,
    /// Let consolidation replace spot nodes with cheaper spot nodes
    /// (`FLEETWRIGHT_SPOT_TO_SPOT_CONSOLIDATION`, Karpenter's `SpotToSpotConsolidation` gate;
    /// off unless set, as Karpenter's is: spot nodes are then only deleted, never replaced).
    pub spot_to_spot: bool,
    /// The cluster CA bundle Karpenter's EC2NodeClass hash takes, when Karpenter was given one
    /// (its `CLUSTER_CA_BUNDLE`); unset, the tick reads `kube-root-ca.crt`, which is what
    /// Karpenter hashes by default.
    pub cluster_ca_bundle: Option<String>,
    /// Karpenter's scheduler config document (`FLEETWRIGHT_SCHEDULER_CONFIG`, as Karpenter's
    /// `SCHEDULER_CONFIG`), as written: only the tick reads it ([`Settings::default_spread`]), so
    /// a mistake in it never stops the interruption or webhook function.
    pub scheduler_config: Option<String>,
    /// Whether the tick asks for a follow-up sooner than its schedule (a disruption to confirm,
    /// one in flight; on unless `FLEETWRIGHT_FOLLOW_UP=false`).
    pub follow_up: bool,
    /// The SQS queue the tick function sends its follow-ups to, delayed (none: it sends none,
    /// and the schedule carries disruption forward).
    pub follow_up_queue_url: Option<String>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every field is named, so a new one is considered here (a secret is redacted).
        let Settings {
            cluster_name,
            namespace,
            lease_name,
            lease_duration,
            dry_run,
            rebalance,
            webhook_token,
            webhook_token_parameter,
            event_bus,
            kube_api,
            ssm_parameter_root,
            min_values_policy,
            node_repair,
            node_class_cel,
            terminate_first,
            spot_to_spot,
            cluster_ca_bundle,
            scheduler_config,
            follow_up,
            follow_up_queue_url,
        } = self;
        f.debug_struct("Settings")
            .field("cluster_name", cluster_name)
            .field("namespace", namespace)
            .field("lease_name", lease_name)
            .field("lease_duration", lease_duration)
            .field("dry_run", dry_run)
            .field("rebalance", rebalance)
            .field(
                "webhook_token",
                &webhook_token.as_ref().map(|_| crate::webhook::REDACTED),
            )
            .field("webhook_token_parameter", webhook_token_parameter)
            .field("event_bus", event_bus)
            .field("kube_api", kube_api)
            .field("ssm_parameter_root", ssm_parameter_root)
            .field("min_values_policy", min_values_policy)
            .field("node_repair", node_repair)
            .field("node_class_cel", node_class_cel)
            .field("terminate_first", terminate_first)
            .field("spot_to_spot", spot_to_spot)
            .field("cluster_ca_bundle", cluster_ca_bundle)
            .field("scheduler_config", scheduler_config)
            .field("follow_up", follow_up)
            .field("follow_up_queue_url", follow_up_queue_url)
            .finish()
    }
}

fn parse_bool(name: &str, value: Option<String>) -> Result<bool, RuntimeError> {
    match value.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("") | Some("false") | Some("0") | Some("no") => Ok(false),
        Some("true") | Some("1") | Some("yes") => Ok(true),
        Some(other) => Err(RuntimeError::setting(
            name,
            format!("{other:?} is not true or false"),
        )),
    }
}

impl Settings {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, RuntimeError> {
        Settings::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads settings through `get` (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, RuntimeError> {
        let non_empty = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let cluster_name = non_empty("FLEETWRIGHT_CLUSTER_NAME")
            .ok_or_else(|| RuntimeError::setting("FLEETWRIGHT_CLUSTER_NAME", "is required"))?;
        let lease_seconds = match non_empty("FLEETWRIGHT_LEASE_SECONDS") {
            None => DEFAULT_LEASE_SECONDS,
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|s| (10..=900).contains(s))
                .ok_or_else(|| {
                    RuntimeError::setting(
                        "FLEETWRIGHT_LEASE_SECONDS",
                        format!("{v:?} is not a number of seconds in 10..=900"),
                    )
                })?,
        };
        let rebalance = match non_empty("FLEETWRIGHT_REBALANCE").as_deref() {
            None | Some("event") => RebalanceAction::Event,
            Some("drain") => RebalanceAction::Drain,
            Some(other) => {
                return Err(RuntimeError::setting(
                    "FLEETWRIGHT_REBALANCE",
                    format!("{other:?} is not event or drain"),
                ))
            }
        };
        let min_values_policy = match non_empty("FLEETWRIGHT_MIN_VALUES_POLICY") {
            None => MinValuesPolicy::Strict,
            Some(text) => MinValuesPolicy::parse(&text).ok_or_else(|| {
                RuntimeError::setting(
                    "FLEETWRIGHT_MIN_VALUES_POLICY",
                    format!("{text:?} is not Strict or BestEffort"),
                )
            })?,
        };
        let kube_api = match (
            non_empty("FLEETWRIGHT_KUBE_API_URL"),
            non_empty("FLEETWRIGHT_CLUSTER_ENDPOINT"),
        ) {
            (Some(url), _) => {
                if !url.starts_with("http://127.0.0.1") && !url.starts_with("http://localhost") {
                    return Err(RuntimeError::setting(
                        "FLEETWRIGHT_KUBE_API_URL",
                        "unauthenticated access is only for local stacks (http://127.0.0.1:PORT)",
                    ));
                }
                KubeApi::Plain { url }
            }
            (None, Some(url)) => {
                if !url.starts_with("https://") {
                    return Err(RuntimeError::setting(
                        "FLEETWRIGHT_CLUSTER_ENDPOINT",
                        "must be an https:// URL",
                    ));
                }
                KubeApi::Endpoint {
                    url,
                    ca: non_empty("FLEETWRIGHT_CLUSTER_CA"),
                }
            }
            (None, None) => KubeApi::Eks,
        };
        let webhook_token = non_empty("FLEETWRIGHT_WEBHOOK_TOKEN");
        if let Some(t) = &webhook_token {
            check_webhook_token("FLEETWRIGHT_WEBHOOK_TOKEN", t)?;
        }
        let webhook_token_parameter = non_empty("FLEETWRIGHT_WEBHOOK_TOKEN_PARAMETER");
        if webhook_token.is_some() && webhook_token_parameter.is_some() {
            return Err(RuntimeError::setting(
                "FLEETWRIGHT_WEBHOOK_TOKEN_PARAMETER",
                "set it or FLEETWRIGHT_WEBHOOK_TOKEN, not both",
            ));
        }
        let lease_name =
            non_empty("FLEETWRIGHT_LEASE_NAME").unwrap_or_else(|| "fleetwright-tick".into());
        // Taking another autoscaler's leader Lease would stop it (or make it and Fleetwright
        // fight over the cluster): shadow mode runs beside it, and must never hold its Lease.
        let theirs = fleetwright_kube::peers::known_leases("")
            .into_iter()
            .find(|(_, name, _)| *name == lease_name);
        if let Some((_, _, who)) = theirs {
            return Err(RuntimeError::setting(
                "FLEETWRIGHT_LEASE_NAME",
                format!("{lease_name:?} is {who}'s leader Lease; Fleetwright must not take it"),
            ));
        }
        Ok(Settings {
            cluster_name,
            namespace: non_empty("FLEETWRIGHT_NAMESPACE").unwrap_or_else(|| "karpenter".into()),
            lease_name,
            lease_duration: Duration::from_secs(lease_seconds),
            dry_run: parse_bool("FLEETWRIGHT_DRY_RUN", get("FLEETWRIGHT_DRY_RUN"))?,
            rebalance,
            webhook_token,
            webhook_token_parameter,
            event_bus: non_empty("FLEETWRIGHT_EVENT_BUS").unwrap_or_else(|| "default".into()),
            kube_api,
            ssm_parameter_root: non_empty("FLEETWRIGHT_SSM_PARAMETER_ROOT").unwrap_or_default(),
            min_values_policy,
            node_repair: crate::tick::repair::NodeRepair::of(
                parse_bool("FLEETWRIGHT_NODE_REPAIR", get("FLEETWRIGHT_NODE_REPAIR"))?,
                parse_bool(
                    "FLEETWRIGHT_LEGACY_NODE_REPAIR",
                    get("FLEETWRIGHT_LEGACY_NODE_REPAIR"),
                )?,
                parse_bool(
                    "FLEETWRIGHT_REBOOT_FOR_REPAIR",
                    get("FLEETWRIGHT_REBOOT_FOR_REPAIR"),
                )?,
            ),
            node_class_cel: parse_bool(
                "FLEETWRIGHT_NODE_CLASS_CEL",
                get("FLEETWRIGHT_NODE_CLASS_CEL"),
            )?,
            terminate_first: TerminateFirst {
                drift: parse_bool(
                    "FLEETWRIGHT_TERMINATE_FIRST_DRIFT",
                    get("FLEETWRIGHT_TERMINATE_FIRST_DRIFT"),
                )?,
                repair: parse_bool(
                    "FLEETWRIGHT_TERMINATE_FIRST_REPAIR",
                    get("FLEETWRIGHT_TERMINATE_FIRST_REPAIR"),
                )?,
            },
            spot_to_spot: parse_bool(
                "FLEETWRIGHT_SPOT_TO_SPOT_CONSOLIDATION",
                get("FLEETWRIGHT_SPOT_TO_SPOT_CONSOLIDATION"),
            )?,
            cluster_ca_bundle: non_empty("FLEETWRIGHT_CLUSTER_CA_BUNDLE"),
            scheduler_config: non_empty("FLEETWRIGHT_SCHEDULER_CONFIG"),
            follow_up: match non_empty("FLEETWRIGHT_FOLLOW_UP") {
                None => true,
                set => parse_bool("FLEETWRIGHT_FOLLOW_UP", set)?,
            },
            follow_up_queue_url: non_empty("FLEETWRIGHT_FOLLOW_UP_QUEUE_URL"),
        })
    }
}

impl Settings {
    /// kube-scheduler's default topology spread, from the scheduler config document; none
    /// unless it is set. A document kube-scheduler would refuse is an error naming the field.
    pub fn default_spread(
        &self,
    ) -> Result<Vec<fleetwright_core::default_spread::DefaultSpread>, RuntimeError> {
        let text = self.scheduler_config.as_deref().unwrap_or_default();
        fleetwright_kube::scheduler_config::parse(text)
            .map_err(|e| RuntimeError::setting("FLEETWRIGHT_SCHEDULER_CONFIG", e.to_string()))
    }
}

/// A webhook token must be at least 16 characters of `[A-Za-z0-9_-]` (it is a URL path segment).
/// `source` names where it came from: the variable, or the SSM parameter.
pub fn check_webhook_token(source: &str, token: &str) -> Result<(), RuntimeError> {
    let ok = token.len() >= 16
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(RuntimeError::setting(
            source,
            "must be at least 16 characters of [A-Za-z0-9_-]",
        ))
    }
}

#[cfg(test)]
#[path = "../tests/unit/settings.rs"]
mod tests;
