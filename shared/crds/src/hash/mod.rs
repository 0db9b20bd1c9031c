//! Karpenter's drift hashes, computed as Karpenter computes them, so that a NodeClaim Karpenter
//! launched and one Fleetwright launched are compared by the same rule and the same number.
//!
//! Karpenter hashes a NodePool's template (`karpenter.sh/nodepool-hash`, version `v3`) and an
//! EC2NodeClass's spec (`karpenter.k8s.aws/ec2nodeclass-hash`, version `v6` since Karpenter
//! v1.15, with the kubelet settings as their JSON text) with
//! `github.com/mitchellh/hashstructure/v2` (FormatV2, `SlicesAsSets`, `IgnoreZeroValue`,
//! `ZeroNil`), which walks the Go structs by reflection. This module owns that walk, over a
//! small model of Go values ([`Go`]), and the mapping of the Rust CRD types onto Karpenter's Go
//! types ([`nodepool_hash`], [`ec2nodeclass_hash`]): the Go struct and field names, their order,
//! the `hash:"ignore"` and `hash:"string"` tags, pointer and integer widths, Go's zero values,
//! and `encoding/json`'s text of the kubelet settings ([`go_json`]). `tests/karpenter-hash` runs
//! Karpenter's own code on generated objects to check it.

mod go;
mod karpenter;

pub use self::go::{go_duration_nanos, go_json, quantity_string, Go};
pub use self::karpenter::{
    ec2nodeclass_hash, nodepool_hash, EC2NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION,
};

/// A value Karpenter's Go types could not hold (a duration or quantity that does not parse, an
/// integer too wide for its Go field), naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct HashError {
    pub field: String,
    pub reason: String,
}
