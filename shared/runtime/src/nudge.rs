//! Nudging the tick function. The port and its constants are `fleetwright_cloud::nudge`; the
//! webhook's `Pending Pod` detail type comes from the admission decisions.

pub use fleetwright_cloud::nudge::{Nudge, CAPACITY_NEEDED, SOURCE};
pub use fleetwright_kube::admission::PENDING_POD;
