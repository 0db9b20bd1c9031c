//! The condition types Karpenter's objects carry (and the Node's `Ready`), named once.

/// A NodeClaim's instance was launched (its provider id is known).
pub const LAUNCHED: &str = "Launched";
/// A NodeClaim's node joined and was synced with it.
pub const REGISTERED: &str = "Registered";
/// A NodeClaim's node is Ready and free of startup taints.
pub const INITIALIZED: &str = "Initialized";
/// A NodeClaim no longer matches its NodePool or EC2NodeClass (the reason says how).
pub const DRIFTED: &str = "Drifted";
/// A Node's kubelet condition, and an object's summary condition.
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
