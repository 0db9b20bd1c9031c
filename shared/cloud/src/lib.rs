//! fleetwright-cloud: the cloud port. What the runtime asks of a cloud ([`Cloud`]), the values
//! that cross it (launch requests, launched and owned instances, resolved node classes,
//! unavailable offerings), its one error type ([`CloudError`]), and the pure rules every
//! implementation shares: offering selection for a launch, ownership and orphans. The EC2 adapter
//! (`fleetwright-aws`) and the simulator (`fleetwright-sim`) implement it; nothing here talks to a cloud, so the use
//! cases and the simulator build without the AWS SDK.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use fleetwright_core::Catalog;
use fleetwright_crds::EC2NodeClass;

pub mod ami;
pub mod cluster;
pub mod error;
pub mod instances;
pub mod launch;
pub mod nodeclass;
pub mod nudge;
pub mod unavailable;

pub use error::CloudError;
pub use instances::{Instance, Termination};
pub use launch::{LaunchRequest, Launched};
pub use nodeclass::ResolvedNodeClass;
pub use unavailable::UnavailableOfferings;

/// Everything the runtime asks of the cloud. Implemented by the EC2 adapter (`fleetwright_aws::Ec2Cloud`) and by the simulator.
pub trait Cloud: Send + Sync {
    /// The instance catalog with current prices and unavailable offerings applied.
    fn catalog(
        &self,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Arc<Catalog>, CloudError>> + Send;

    /// What an EC2NodeClass resolves to (subnets, security groups, AMIs, instance profile).
    fn nodeclass(
        &self,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<ResolvedNodeClass, CloudError>> + Send;

    /// Launches one instance for a NodeClaim. Idempotent: a NodeClaim that already has an
    /// instance gets that instance back.
    fn launch(
        &self,
        req: &LaunchRequest,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Launched, CloudError>> + Send;

    /// Terminates an instance this cluster launched; refuses any other.
    fn terminate(
        &self,
        instance_id: &str,
    ) -> impl Future<Output = Result<Termination, CloudError>> + Send;

    /// Reboots an instance this cluster launched for NodeClaim `nodeclaim` (a repair's reboot);
    /// refuses any other. `Ok(false)`: the instance is gone or going. A cloud that cannot reboot
    /// refuses, and the repair replaces the node instead.
    fn reboot(
        &self,
        instance_id: &str,
        nodeclaim: &str,
    ) -> impl Future<Output = Result<bool, CloudError>> + Send {
        let _ = nodeclaim;
        let refused = CloudError::Refused {
            action: "reboot",
            instance_id: instance_id.to_string(),
            reason: "this cloud cannot reboot instances".into(),
        };
        async { Err(refused) }
    }

    /// Every live instance this cluster launched.
    fn instances(&self) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send;

    /// The instances with these ids, looked up by id (whatever their tags), in any state; ids the
    /// cloud no longer knows are left out. A listing by tag that misses an instance (stale,
    /// empty, or its tags removed) is confirmed here before anything is deleted for it.
    fn describe(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send;

    /// Marks an offering unavailable (a spot interruption, say).
    fn mark_unavailable(
        &self,
        capacity_type: &str,
        instance_type: &str,
        zone: &str,
        now: DateTime<Utc>,
    );

    /// The unavailable offerings, for persisting.
    fn unavailable(&self) -> UnavailableOfferings;

    /// Merges persisted unavailable offerings (after a cold start).
    fn restore_unavailable(&self, saved: &UnavailableOfferings);

    /// Deletes this cluster's launch templates that no launch has used for a while; returns
    /// their names. A cloud without launch templates has none to collect.
    fn collect_launch_templates(
        &self,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<String>, CloudError>> + Send {
        let _ = now;
        async { Ok(Vec::new()) }
    }
}

/// A shared cloud (one per warm container, used by every invocation) is a cloud too.
impl<T: Cloud> Cloud for Arc<T> {
    fn catalog(
        &self,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Arc<Catalog>, CloudError>> + Send {
        (**self).catalog(now)
    }

    fn nodeclass(
        &self,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<ResolvedNodeClass, CloudError>> + Send {
        (**self).nodeclass(nodeclass, now)
    }

    fn launch(
        &self,
        req: &LaunchRequest,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Launched, CloudError>> + Send {
        (**self).launch(req, nodeclass, now)
    }

    fn terminate(
        &self,
        instance_id: &str,
    ) -> impl Future<Output = Result<Termination, CloudError>> + Send {
        (**self).terminate(instance_id)
    }

    fn reboot(
        &self,
        instance_id: &str,
        nodeclaim: &str,
    ) -> impl Future<Output = Result<bool, CloudError>> + Send {
        (**self).reboot(instance_id, nodeclaim)
    }

    fn instances(&self) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send {
        (**self).instances()
    }

    fn describe(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send {
        (**self).describe(ids)
    }

    fn mark_unavailable(
        &self,
        capacity_type: &str,
        instance_type: &str,
        zone: &str,
        now: DateTime<Utc>,
    ) {
        (**self).mark_unavailable(capacity_type, instance_type, zone, now)
    }

    fn unavailable(&self) -> UnavailableOfferings {
        (**self).unavailable()
    }

    fn restore_unavailable(&self, saved: &UnavailableOfferings) {
        (**self).restore_unavailable(saved)
    }

    fn collect_launch_templates(
        &self,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<String>, CloudError>> + Send {
        (**self).collect_launch_templates(now)
    }
}
