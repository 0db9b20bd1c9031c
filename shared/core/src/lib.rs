//! fleetwright-core: the pure, deterministic engine of Fleetwright.
//!
//! A cluster [`model::Snapshot`] and an instance [`catalog::Catalog`] go in; a [`plan::Plan`] of
//! decisions comes out. Nothing here performs I/O, reads the clock or the environment: time is an
//! argument, and the adapters (`fleetwright-aws`, `fleetwright-kube`) apply the decisions.

pub mod catalog;
pub mod check;
pub mod default_spread;
pub mod disruption;
pub use disruption::budget;
pub mod error;
pub mod explain;
pub mod labels;
pub mod lp;
pub mod model;
pub mod plan;
pub mod quantity;
pub mod region;
pub mod replicas;
pub mod requirements;
pub mod resources;
pub mod rng;
pub mod scheduler;
pub mod synthetic;
mod topology;

pub use catalog::{Catalog, InstanceType, NodeClassSettings};
pub use error::CoreError;
pub use model::Snapshot;
pub use plan::Plan;
pub use requirements::{Operator, Requirement, Requirements};
pub use resources::Resources;
pub use scheduler::{schedule, ScheduleOptions};
