//! fleetwright-sim: the project's one simulated world, what the use cases run against when
//! they are not in AWS and Kubernetes. [`cloud::SimCloud`] implements the runtime's `Cloud`
//! trait over a catalog with the same pure offering selection `Ec2Cloud` uses;
//! [`cluster::Cluster`] is a real `kube::Client` over the in-memory API plus what the rest of
//! Kubernetes does between two invocations (a kubelet, the Deployment and DaemonSet controllers,
//! a scheduler). `fleetwright simulate`, the trace benchmark and the runtime's tests use them;
//! everything random comes from one seeded [`fleetwright_core::rng::Rng`].

pub mod cloud;
pub mod cluster;
pub mod memory;

pub use cloud::{subnet_zones, Ice, SimCloud, SimInstance, SPOT_WARNING, ZONES};
pub use cluster::Cluster;
