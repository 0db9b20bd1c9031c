//! Where a tick's wall time goes, by phase: logged with its summary and sent as a metric, so an
//! operator sees whether a slow tick waited on the API server, the cloud or its own decisions.

/// Where one tick's wall time went. The phases run one after another on one thread, so they add
/// up to the tick's time after the Lease.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseTimes {
    /// Listing the cluster: the API server's answers and decoding their JSON.
    pub list: std::time::Duration,
    /// Turning the objects into the core's snapshot (pods as their pages arrive).
    pub convert: std::time::Duration,
    /// Reading the cloud: instances, the catalog, EC2NodeClass resolutions.
    pub cloud: std::time::Duration,
    /// The pure decisions.
    pub decide: std::time::Duration,
    /// Applying them: Kubernetes writes and cloud calls.
    pub write: std::time::Duration,
}

impl PhaseTimes {
    /// Each phase's name and seconds, in the order they run.
    pub fn seconds(&self) -> [(&'static str, f64); 5] {
        [
            ("list", self.list.as_secs_f64()),
            ("convert", self.convert.as_secs_f64()),
            ("cloud", self.cloud.as_secs_f64()),
            ("decide", self.decide.as_secs_f64()),
            ("write", self.write.as_secs_f64()),
        ]
    }
}

/// What the tick's time after the Lease leaves once the timed phases are taken out: the
/// decisions (and what little runs between the phases).
pub(super) fn rest(total: std::time::Duration, phases: &PhaseTimes) -> std::time::Duration {
    let timed = phases.list + phases.convert + phases.cloud + phases.write;
    total.saturating_sub(timed)
}
