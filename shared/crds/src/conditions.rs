//! The condition types Karpenter's objects carry, and those of the Kubernetes objects read or
//! simulated beside them, with the reasons written or matched, named once.

/// A NodeClaim's instance was launched (its provider id is known).
pub const LAUNCHED: &str = "Launched";
/// A NodeClaim's node joined and was synced with it.
pub const REGISTERED: &str = "Registered";
/// A NodeClaim's node is Ready and free of startup taints.
pub const INITIALIZED: &str = "Initialized";
/// A NodeClaim's node is being rebooted for repair (True until the reboot ends).
pub const REBOOTING: &str = "Rebooting";
/// A NodeClaim no longer matches its NodePool or EC2NodeClass (the reason says how).
pub const DRIFTED: &str = "Drifted";
/// A Node's kubelet condition, a Pod's, and an object's summary condition.
pub const READY: &str = "Ready";
/// A NodePool's or EC2NodeClass's spec reads.
pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// A NodePool's EC2NodeClass exists and is ready.
pub const NODE_CLASS_READY: &str = "NodeClassReady";
/// An EC2NodeClass's AMI selector resolves.
pub const AMIS_READY: &str = "AMIsReady";
/// An EC2NodeClass's capacity reservation selector resolves.
pub const CAPACITY_RESERVATIONS_READY: &str = "CapacityReservationsReady";
/// An EC2NodeClass's instance profile exists.
pub const INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
/// An EC2NodeClass's security group selector resolves.
pub const SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
/// An EC2NodeClass's subnet selector resolves.
pub const SUBNETS_READY: &str = "SubnetsReady";
/// An EC2NodeClass's placement group selector resolves.
pub const PLACEMENT_GROUP_READY: &str = "PlacementGroupReady";
/// The `Ready=False` reason of an object whose other conditions are not all True.
pub const UNHEALTHY_DEPENDENTS: &str = "UnhealthyDependents";

/// A Pod's condition: kube-scheduler bound it to a node (False: it found none yet).
pub const POD_SCHEDULED: &str = "PodScheduled";
/// The `PodScheduled=False` reason kube-scheduler gives a pod that no node fits.
pub const UNSCHEDULABLE: &str = "Unschedulable";

/// The Node `Ready=True` reason a kubelet posts.
pub const KUBELET_READY: &str = "KubeletReady";
/// The Node `Ready=False` reason a kubelet posts while its node is not ready (as at startup).
pub const KUBELET_NOT_READY: &str = "KubeletNotReady";
/// The Node `Ready=Unknown` reason the node lifecycle controller sets when the kubelet is silent.
pub const NODE_STATUS_UNKNOWN: &str = "NodeStatusUnknown";

/// A Job's condition once as many of its pods as it needed succeeded.
pub const JOB_COMPLETE: &str = "Complete";
/// A Job's condition once it gave up (its backoff limit or deadline ran out).
pub const JOB_FAILED: &str = "Failed";

/// A PodDisruptionBudget's condition: its pods may be evicted now.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// The `DisruptionAllowed=True` reason: more pods are healthy than the budget needs.
pub const SUFFICIENT_PODS: &str = "SufficientPods";
/// The `DisruptionAllowed=False` reason: no more pods than the budget needs are healthy.
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";
