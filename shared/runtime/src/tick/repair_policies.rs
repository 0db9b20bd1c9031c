//! The repair policies of Karpenter v1.15 with the AWS provider: which node conditions are
//! unhealthy, with which reasons, for how long they are tolerated, how long the drain may take,
//! and whether a reboot clears them; and the policies of the node health controller before it.

use chrono::Duration;
use fleetwright_crds::conditions;

/// What a repair policy does to the node once it is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairAction {
    /// The NodeClaim is deleted and its node replaced.
    Replace,
    /// The node is rebooted in place (with [`super::repair::NodeRepair::Reboot`]; else replaced).
    Reboot,
}

/// Which reasons of a condition a policy takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reasons {
    /// Any reason.
    Any,
    /// A reason that names one of these GPU XID codes: `XID` and the code anywhere in it, as
    /// the AWS provider's `.*XID(46|48|…).*` matches.
    Xid(&'static [&'static str]),
}

impl Reasons {
    pub(crate) fn take(&self, reason: &str) -> bool {
        match self {
            Reasons::Any => true,
            Reasons::Xid(codes) => codes
                .iter()
                .any(|code| reason.contains(&format!("XID{code}"))),
        }
    }
}

/// One repair policy: a node condition, the status that is unhealthy, the reasons it takes,
/// how long it is tolerated, and how long the drain may take once it repairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairPolicy {
    pub condition: &'static str,
    pub status: &'static str,
    pub reasons: Reasons,
    pub toleration: Duration,
    pub drain: Duration,
    pub action: RepairAction,
}

const fn policy(
    condition: &'static str,
    status: &'static str,
    reasons: Reasons,
    minutes: i64,
    drain_minutes: i64,
) -> RepairPolicy {
    RepairPolicy {
        condition,
        status,
        reasons,
        toleration: Duration::minutes(minutes),
        drain: Duration::minutes(drain_minutes),
        action: RepairAction::Replace,
    }
}

/// The policy, with a reboot as its action.
const fn rebooted(p: RepairPolicy) -> RepairPolicy {
    RepairPolicy {
        action: RepairAction::Reboot,
        ..p
    }
}

const ACCELERATED_HARDWARE: &str = "AcceleratedHardwareReady";

/// GPU faults a reboot clears: with [`NodeRepair::Reboot`] (Karpenter's `RebootForRepair`
/// gate) such a node is rebooted; without it (the default) replaced, on the same timing.
const REBOOT_CLEARABLE_XIDS: &[&str] = &[
    "46", "48", "54", "62", "63", "95", "109", "110", "136", "140", "143", "155", "156", "158",
];

/// Fatal GPU faults: replaced as fast.
const FATAL_XIDS: &[&str] = &["64", "74", "79", "119", "120"];

/// The AWS provider's repair policies (Karpenter v1.15.0): the kubelet's `Ready`, and the EKS
/// node monitoring agent's conditions.
pub const POLICIES: [RepairPolicy; 8] = [
    policy(conditions::READY, "False", Reasons::Any, 30, 10),
    policy(conditions::READY, "Unknown", Reasons::Any, 30, 10),
    rebooted(policy(
        ACCELERATED_HARDWARE,
        "False",
        Reasons::Xid(REBOOT_CLEARABLE_XIDS),
        10,
        5,
    )),
    policy(
        ACCELERATED_HARDWARE,
        "False",
        Reasons::Xid(FATAL_XIDS),
        10,
        5,
    ),
    policy("StorageReady", "False", Reasons::Any, 30, 10),
    policy("NetworkingReady", "False", Reasons::Any, 30, 10),
    policy("KernelReady", "False", Reasons::Any, 30, 10),
    policy("ContainerRuntimeReady", "False", Reasons::Any, 30, 10),
];

/// The policy for a condition that a policy names but whose reason none of them takes: an
/// unrecognised GPU fault waits longer before it is replaced.
pub const FALLBACK: RepairPolicy = policy(ACCELERATED_HARDWARE, "False", Reasons::Any, 30, 10);

/// The policies of the node health controller before v1.15 (`NodeRepair::Legacy`).
pub const LEGACY_POLICIES: [RepairPolicy; 7] = [
    policy(conditions::READY, "False", Reasons::Any, 30, 0),
    policy(conditions::READY, "Unknown", Reasons::Any, 30, 0),
    policy(ACCELERATED_HARDWARE, "False", Reasons::Any, 10, 0),
    policy("StorageReady", "False", Reasons::Any, 30, 0),
    policy("NetworkingReady", "False", Reasons::Any, 30, 0),
    policy("KernelReady", "False", Reasons::Any, 30, 0),
    policy("ContainerRuntimeReady", "False", Reasons::Any, 30, 0),
];
