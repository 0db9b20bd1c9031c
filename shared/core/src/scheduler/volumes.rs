//! A node's volume attach limits, as kube-scheduler's and Karpenter's volume limits count them:
//! the distinct claims its pods mount per CSI driver may not exceed the driver's limit on it, so
//! a pod is never planned onto a node it could not attach its volumes to.

use super::*;

impl Bin {
    /// Whether the pod's claims not yet on the bin would take a driver past its limit.
    pub(crate) fn exceeds_volume_limits(&self, pod: &Pod) -> bool {
        self.volume_limits.iter().any(|(driver, &limit)| {
            let added = self.added(pod, driver);
            added > 0 && self.mounted(driver) + added > limit as usize
        })
    }

    /// Records the pod's claims on the bin, each once, when the bin has limits to count.
    pub(crate) fn mount(&mut self, pod: &Pod) {
        if self.volume_limits.is_empty() {
            return;
        }
        for v in &pod.volumes {
            if !self.volumes.contains(v) {
                self.volumes.push(v.clone());
            }
        }
    }

    /// The claims of `driver` on the bin.
    fn mounted(&self, driver: &str) -> usize {
        self.volumes.iter().filter(|(d, _)| d == driver).count()
    }

    /// The pod's claims of `driver` that the bin does not hold yet.
    fn added(&self, pod: &Pod, driver: &str) -> usize {
        pod.volumes
            .iter()
            .filter(|v| v.0 == driver && !self.volumes.contains(v))
            .count()
    }
}
