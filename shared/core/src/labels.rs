//! Well-known label, taint, annotation and AWS tag keys shared with Karpenter and Kubernetes.

pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const ARCH: &str = "kubernetes.io/arch";
pub const OS: &str = "kubernetes.io/os";
pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const REGION: &str = "topology.kubernetes.io/region";
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
pub const NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
pub const INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
pub const INSTANCE_ACCELERATOR_MANUFACTURER: &str =
    "karpenter.k8s.aws/instance-accelerator-manufacturer";
pub const INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
/// A Windows node's OS build (`10.0.17763`); Linux nodes do not have it.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// The id of a node's availability zone (`use1-az1`), the same in every account.
pub const ZONE_ID: &str = "topology.k8s.aws/zone-id";
/// The EBS CSI driver's zone key, which a PersistentVolume's node affinity may name.
pub const EBS_CSI_ZONE: &str = "topology.ebs.csi.aws.com/zone";

/// The deprecated name of [`ARCH`].
pub const BETA_ARCH: &str = "beta.kubernetes.io/arch";
/// The deprecated name of [`OS`].
pub const BETA_OS: &str = "beta.kubernetes.io/os";
/// The deprecated name of [`INSTANCE_TYPE`].
pub const BETA_INSTANCE_TYPE: &str = "beta.kubernetes.io/instance-type";
/// The deprecated name of [`ZONE`].
pub const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// The deprecated name of [`REGION`].
pub const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";

/// On a Node: set once it registered against its NodeClaim.
pub const NODE_REGISTERED: &str = "karpenter.sh/registered";
/// On a Namespace: its name, as the API server labels every namespace.
pub const NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";
/// The tool that manages an object (a label Kubernetes recommends).
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// On a mirror pod (a static pod the kubelet runs from a file): the annotation that marks it.
pub const MIRROR_POD: &str = "kubernetes.io/config.mirror";

pub const CAPACITY_SPOT: &str = "spot";
pub const CAPACITY_ON_DEMAND: &str = "on-demand";
/// An instance launched into a capacity reservation (Karpenter v1.3+).
pub const CAPACITY_RESERVED: &str = "reserved";
/// The reservation a reserved node runs in, its type (`default`, `capacity-block`) and whether
/// AWS may interrupt it: offering labels, set on the NodeClaim at launch.
pub const RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
pub const RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
pub const RESERVATION_INTERRUPTIBLE: &str = "karpenter.k8s.aws/capacity-reservation-interruptible";
/// The placement group a node was launched into (its id), and for a partition placement group
/// the partition EC2 put it in: set on the NodeClaim at launch and registration.
pub const PLACEMENT_GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";
pub const PLACEMENT_GROUP_PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";

pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// On a pod: the cost of evicting it, an int32 weighed into a candidate's disruption cost
/// (Karpenter v1.15); without it, `controller.kubernetes.io/pod-deletion-cost` is read.
pub const DISRUPTION_COST: &str = "karpenter.sh/disruption-cost";
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
/// On a NodeClaim a disruption command has chosen: `<reason>/<command>[/<replacements>]`. The
/// command is recorded here before the node is tainted, so a NodeClaim carrying it is being
/// disrupted already, tainted or not.
pub const DISRUPTION_COMMAND: &str = "fleetwright.io/disruption";
/// On a NodeClaim: when its drain's grace is over (RFC 3339), as Karpenter writes it; the pods
/// still on its node are deleted from then on.
pub const TERMINATION_TIMESTAMP: &str = "karpenter.sh/nodeclaim-termination-timestamp";
pub const TAINT_DISRUPTED: &str = "karpenter.sh/disrupted";
/// The fence on a node being rebooted for repair (Karpenter v1.15): nothing new is scheduled
/// there until it boots again. Its capacity is taken as returning, not gone.
pub const TAINT_REBOOTING: &str = "karpenter.sh/rebooting";
pub const TAINT_UNREGISTERED: &str = "karpenter.sh/unregistered";
/// The node lifecycle controller's taint on a node whose `Ready` condition is False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The node lifecycle controller's taint on a node whose `Ready` condition is Unknown.
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The taint a node carries until the cloud controller manager has initialized it.
pub const TAINT_UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// On a stand-in for a bound pod whose object does not read (a dump file's): it holds its node.
pub const UNREAD_POD: &str = "fleetwright.io/unread";
/// The prefix of the Node Readiness Controller's taints, which Karpenter knows to be ephemeral.
pub const TAINT_READINESS_PREFIX: &str = "readiness.k8s.io/";

/// Karpenter's known ephemeral taints (`KnownEphemeralTaints`), each with the effects it is
/// known with; the Node Readiness Controller's (by prefix, any effect) are known too.
const KNOWN_EPHEMERAL: [(&str, &[&str]); 3] = [
    (TAINT_NOT_READY, &["NoSchedule", "NoExecute"]),
    (TAINT_UNREACHABLE, &["NoSchedule"]),
    (TAINT_UNINITIALIZED, &["NoSchedule"]),
];

/// Whether a taint is one Karpenter knows to be ephemeral: a node that still has one is not
/// initialized (`KnownEphemeralTaintsRemoved`): no capacity yet, and no disruption candidate.
pub fn is_known_ephemeral_taint(key: &str, effect: &str) -> bool {
    key.starts_with(TAINT_READINESS_PREFIX)
        || KNOWN_EPHEMERAL
            .iter()
            .any(|(k, effects)| *k == key && effects.contains(&effect))
}

/// Whether a taint's key is one of Karpenter's known ephemeral taints, whatever its effect.
pub fn is_known_ephemeral_key(key: &str) -> bool {
    key.starts_with(TAINT_READINESS_PREFIX) || KNOWN_EPHEMERAL.iter().any(|(k, _)| *k == key)
}

/// On an instance: the NodeClaim it was launched for (an AWS tag).
pub const TAG_NODECLAIM: &str = "karpenter.sh/nodeclaim";
/// On launch templates and instance profiles: the cluster that made them (an AWS tag).
pub const TAG_CLUSTER: &str = "karpenter.k8s.aws/cluster";
/// The EKS cluster a resource belongs to (an AWS tag), which IAM policies are scoped by.
pub const TAG_EKS_CLUSTER_NAME: &str = "eks:eks-cluster-name";
/// The start of `kubernetes.io/cluster/<cluster>`, the tag (`owned`) on a cluster's resources.
pub const TAG_CLUSTER_PREFIX: &str = "kubernetes.io/cluster/";
/// The tag that Karpenter's getting-started guide puts on a cluster's subnets and security groups.
pub const TAG_DISCOVERY: &str = "karpenter.sh/discovery";

pub const RESOURCE_CPU: &str = "cpu";
pub const RESOURCE_MEMORY: &str = "memory";
pub const RESOURCE_EPHEMERAL: &str = "ephemeral-storage";
pub const RESOURCE_PODS: &str = "pods";
pub const RESOURCE_POD_ENI: &str = "vpc.amazonaws.com/pod-eni";
pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const RESOURCE_AMD_GPU: &str = "amd.com/gpu";
pub const RESOURCE_NEURON: &str = "aws.amazon.com/neuron";
pub const RESOURCE_HABANA: &str = "habana.ai/gaudi";
pub const RESOURCE_EFA: &str = "vpc.amazonaws.com/efa";

/// Labels that a pod may require although no NodePool lists them: they are set on every node
/// from the instance type, the offering or the node itself.
pub fn is_well_known(key: &str) -> bool {
    matches!(
        key,
        INSTANCE_TYPE
            | ARCH
            | OS
            | HOSTNAME
            | ZONE
            | REGION
            | CAPACITY_TYPE
            | RESERVATION_ID
            | RESERVATION_TYPE
            | RESERVATION_INTERRUPTIBLE
            | PLACEMENT_GROUP_ID
            | PLACEMENT_GROUP_PARTITION
            | NODEPOOL
            | NODECLASS
            | INSTANCE_CATEGORY
            | INSTANCE_FAMILY
            | INSTANCE_GENERATION
            | INSTANCE_SIZE
            | INSTANCE_CPU
            | INSTANCE_CPU_MANUFACTURER
            | INSTANCE_MEMORY
            | INSTANCE_HYPERVISOR
            | INSTANCE_GPU_COUNT
            | INSTANCE_GPU_NAME
            | INSTANCE_GPU_MANUFACTURER
            | INSTANCE_GPU_MEMORY
            | INSTANCE_LOCAL_NVME
            | INSTANCE_NETWORK_BANDWIDTH
            | INSTANCE_EBS_BANDWIDTH
            | INSTANCE_ACCELERATOR_NAME
            | INSTANCE_ACCELERATOR_MANUFACTURER
            | INSTANCE_ACCELERATOR_COUNT
            | WINDOWS_BUILD
            | ZONE_ID
            | BETA_ARCH
            | BETA_OS
            | BETA_INSTANCE_TYPE
            | BETA_ZONE
            | BETA_REGION
    )
}

/// Maps deprecated label keys to their stable names.
pub fn normalize_key(key: &str) -> &str {
    match key {
        BETA_ARCH => ARCH,
        BETA_OS => OS,
        BETA_INSTANCE_TYPE => INSTANCE_TYPE,
        BETA_ZONE => ZONE,
        BETA_REGION => REGION,
        other => other,
    }
}
