//! What each phase of the tick decides, from the state the machine holds: the pure decision
//! functions called with what was read and what earlier phases did.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Timelike, Utc};
use fleetwright_core::scheduler::moving::moving_pods;
use fleetwright_core::{schedule, Catalog, Plan, ScheduleOptions, Snapshot};
use tracing::{debug, info, warn};

use super::{Decision, Input, Need, Phase, TickState};
use crate::metrics;
use crate::tick::action::Action;
use crate::tick::say::TICK;
use crate::tick::{
    decide, disruption, expiration, finish, follow_up, in_progress, isolation, pod_records,
    prespin, provision, reboot, repair, reservations, status,
};

impl TickState<'_> {
    pub(super) fn decide(&mut self, phase: Phase) -> Decision {
        let created = std::mem::take(&mut self.created);
        // The NodeClaims created after the Launch phase (repair's and disruption's
        // replacements) are launched now, not a tick later.
        if phase_index(phase) > phase_index(Phase::Register) {
            self.replacements.extend(created.iter().cloned());
        }
        self.claims.extend(created);
        if phase == Phase::LaunchReplacements {
            let replacements = std::mem::take(&mut self.replacements);
            return Decision::Actions(provision::unlaunched(&replacements));
        }
        match phase {
            Phase::Plan => self.plan(),
            Phase::Replicas => self.replicas(),
            Phase::Launch => Decision::Actions(provision::unlaunched(&self.claims)),
            Phase::Register => Decision::Actions(decide::registrations(self.dump, &self.claims)),
            Phase::Initialize => Decision::Actions(decide::initializations(
                self.dump,
                &self.claims,
                &self.registered,
            )),
            Phase::Restamp => Decision::Actions(decide::restamps(self.dump, &self.claims)),
            Phase::Liveness => {
                let pools: Vec<String> = (self.snapshot.nodepools.iter())
                    .map(|p| p.name.clone())
                    .collect();
                if decide::joining(&self.claims, &pools, self.now) {
                    self.found.follow_up = Some(follow_up::POLL)
                        .into_iter()
                        .chain(self.found.follow_up)
                        .min();
                }
                Decision::Actions(decide::liveness(&self.claims, &self.registered, self.now))
            }
            Phase::DeletedNodes => {
                Decision::Actions(finish::deleted_nodes(self.dump, &self.claims))
            }
            Phase::OrphanedNodes => self.orphaned_nodes(),
            Phase::Expire => {
                let next = expiration::next_expiry(&self.claims, self.now);
                self.found.follow_up = next.into_iter().chain(self.found.follow_up).min();
                Decision::Actions(expiration::expired(self.dump, &self.claims, self.now))
            }
            Phase::Expiring => Decision::Actions(reservations::expiring(
                &self.claims,
                &self.reservations,
                self.now,
            )),
            Phase::Repair if self.node_repair != repair::NodeRepair::Off => {
                let mut actions = repair::repairs(
                    self.dump,
                    &self.claims,
                    &self.snapshot.nodepools,
                    self.now,
                    self.node_repair,
                );
                if self.node_repair != repair::NodeRepair::Legacy {
                    actions = match self.prespin(actions) {
                        Ok(actions) => actions,
                        Err(read) => return read,
                    };
                }
                let unreadable: Vec<String> = isolation::errors_of(&self.rejected, "NodeClaim")
                    .into_keys()
                    .collect();
                actions.extend(prespin::continue_prespun(
                    self.dump,
                    &self.claims,
                    (&self.initialized, &unreadable),
                    self.now,
                    self.node_repair,
                ));
                self.count_as_going(&actions);
                Decision::Actions(actions)
            }
            Phase::Repair => Decision::Nothing,
            // Whatever the setting now: a reboot begun is finished (or failed and replaced).
            Phase::Reboot => Decision::Actions(reboot::steps(self.dump, &self.claims, self.now)),
            // While repair is on, a repair waiting for its replacements is its own to carry on.
            Phase::ContinueCommands => Decision::Actions(in_progress::continue_commands_but(
                self.dump,
                &self.claims,
                &self.initialized,
                self.now,
                |c| self.node_repair != repair::NodeRepair::Off && prespin::prespun(c),
            )),
            Phase::DriftMarks => self.drift_marks(),
            Phase::Disrupt => self.disrupt(),
            Phase::LaunchReplacements => Decision::Nothing,
            Phase::Deletions => self.deletions(),
            Phase::Statuses => Decision::Actions(self.statuses()),
            Phase::PodRecords => {
                let observed_at = self.dump.observed_at.unwrap_or(self.now.timestamp());
                let records = pod_records::pod_records(self.dump, &self.claims, observed_at);
                Decision::Actions(records)
            }
            Phase::Garbage => self.garbage(),
            Phase::PartitionLabels => match &self.owned {
                Some(Ok(owned)) => Decision::Actions(finish::partition_labels(&self.claims, owned)),
                _ => Decision::Nothing,
            },
            Phase::Stranded => match &self.owned {
                Some(Ok(_)) => {
                    Decision::Actions(finish::stranded(self.dump, &self.claims, &self.gone))
                }
                _ => Decision::Nothing,
            },
            Phase::SaveUnavailable => self.save_unavailable(),
            Phase::ReportRejected => self.report_rejected(),
        }
    }

    fn plan(&mut self) -> Decision {
        let pending = provision::pending_pods(&self.snapshot);
        if self.input.is_none() {
            self.found.pending_pods = pending;
            self.found
                .metrics
                .add(metrics::PODS_PENDING, pending as f64);
            if pending > 0 {
                info!(target: TICK, pods = pending, "found provisionable pod(s)");
            }
        }
        let moving = moving_pods(&self.snapshot, self.now.timestamp()).len();
        if pending + moving == 0 {
            return Decision::Nothing;
        }
        if let Some(wait) = (moving == 0)
            .then(|| provision::batch_wait(self.dump, self.now))
            .flatten()
        {
            info!(target: TICK, pods = pending, "pending pods are still being created; planning them together in a moment");
            self.found.follow_up = Some(wait).into_iter().chain(self.found.follow_up).min();
            return Decision::Nothing;
        }
        if moving > 0 && self.input.is_none() {
            info!(target: TICK, pods = moving, "planning for the pod(s) of deleting node(s)");
        }
        let catalog = match self.fresh_catalog() {
            Ok(c) => c,
            Err(d) => return d,
        };
        let catalog = catalog.with_overlays(&self.snapshot.overlays);
        let plan = plan_pods(&self.snapshot, &catalog, self.now);
        self.report_plan(&plan);
        Decision::Actions(provision::provision(self.dump, &plan))
    }

    /// The catalog read anew for this phase (a launch may have found offerings unavailable
    /// since the last read).
    fn fresh_catalog(&mut self) -> Result<Arc<Catalog>, Decision> {
        if self.input.is_none() {
            self.catalog = None;
        }
        let catalog = self.catalog();
        if catalog.is_ok() {
            self.catalog = None;
        }
        catalog
    }

    fn replicas(&mut self) -> Decision {
        if !self.snapshot.nodepools.iter().any(|p| p.replicas.is_some()) {
            return Decision::Nothing;
        }
        let catalog = match self.fresh_catalog() {
            Ok(c) => c,
            Err(d) => return d,
        };
        let catalog = catalog.with_overlays(&self.snapshot.overlays);
        let plan = fleetwright_core::replicas::plan(&self.snapshot, &catalog, self.now.timestamp());
        Decision::Actions(provision::replicas(self.dump, &plan))
    }

    /// Records the pods the plan could not place, and logs the plan (Karpenter's lines).
    fn report_plan(&mut self, plan: &Plan) {
        for e in &plan.existing {
            debug!(target: TICK, pod = %e.pod, node = %e.node, "planned onto a node or NodeClaim that exists");
        }
        for u in &plan.unschedulable {
            warn!(target: TICK, pod = %u.pod, reason = %u.reason, "could not schedule pod");
            self.found
                .unschedulable
                .push(format!("{}: {}", u.pod, u.reason));
        }
        if plan.nodeclaims.is_empty() {
            return;
        }
        let pods: usize = plan.nodeclaims.iter().map(|n| n.pods.len()).sum();
        info!(
            target: TICK,
            nodeclaims = plan.nodeclaims.len(),
            pods, "computed new nodeclaim(s) to fit pod(s)"
        );
        info!(target: TICK, "{}", plan.packing_line());
    }

    fn orphaned_nodes(&self) -> Decision {
        // A NodeClaim the read could not take may be the one a deleting node belongs to.
        if !isolation::errors_of(&self.rejected, "NodeClaim").is_empty() {
            return Decision::Nothing;
        }
        Decision::Actions(finish::orphaned_nodes(self.dump, &self.claims))
    }

    fn drift_marks(&mut self) -> Decision {
        if self.input.is_none() {
            drift_state(&mut self.snapshot, self.resolved);
        }
        let catalog = match self.catalog() {
            Ok(c) => c,
            Err(d) => return d,
        };
        let catalog = catalog.with_overlays(&self.snapshot.overlays);
        Decision::Actions(decide::drift_marks(
            &self.claims,
            &self.snapshot,
            &catalog,
            self.now,
        ))
    }

    /// With no pods waiting for capacity and nothing provisioned this tick, the disruption
    /// decided and the decisions waiting confirmed.
    /// The NodeClaims repaired this tick are going: the disruption decided after counts them
    /// against its budgets, as Karpenter's one command per pass would (repair, then drift, then
    /// consolidation, never two at once past a budget).
    fn count_as_going(&mut self, actions: &[Action]) {
        for a in actions {
            if let Action::Reboot {
                node,
                step: reboot::RebootStep::Commit { .. },
                ..
            } = a
            {
                self.fence(node);
                continue;
            }
            let Action::Repair { nodeclaim, .. } = a else {
                continue;
            };
            let claim = self
                .snapshot
                .nodeclaims
                .iter_mut()
                .find(|c| c.name == *nodeclaim);
            if let Some(claim) = claim {
                claim.deleting = true;
            }
        }
    }

    /// Repairs of nodes with pods to move, their replacements launched first
    /// ([`prespin::prespin`]); the catalog's read asked for first when no phase has read it.
    /// When that read fails, no replacement can be planned: nodes that run nothing are repaired
    /// at once, and `Ready` ones wait ([`prespin::without_catalog`]).
    fn prespin(&mut self, actions: Vec<Action>) -> Result<Vec<Action>, Decision> {
        if !actions.iter().any(|a| matches!(a, Action::Repair { .. })) {
            return Ok(actions);
        }
        let catalog = match self.catalog.clone() {
            Some(c) => c,
            None => match self.take_input() {
                Some(Input::Catalog(c)) => {
                    self.catalog = Some(c.clone());
                    c
                }
                Some(input) => {
                    if let Input::Failed(e) = input {
                        self.group_error.get_or_insert(e);
                    }
                    return Ok(prespin::without_catalog(self.dump, actions, self.now));
                }
                None => return Err(Decision::Read(Need::Catalog)),
            },
        };
        let catalog = catalog.with_overlays(&self.snapshot.overlays);
        self.hold_created();
        // A pool that cannot launch takes no replacement.
        let parked = self.park();
        let out = prespin::prespin(self.dump, (&mut self.snapshot, &catalog), actions, self.now);
        isolation::restore(&mut self.snapshot, parked);
        Ok(out)
    }

    /// The NodeClaims this tick created, added to the snapshot as in flight: a repair planned
    /// after them counts them against the limits, and never counts on them as room.
    fn hold_created(&mut self) {
        let read = |name: &Option<String>| {
            self.dump
                .nodeclaims
                .iter()
                .any(|c| &c.metadata.name == name)
        };
        let created: Vec<_> = (self.claims.iter())
            .filter(|c| !read(&c.metadata.name))
            .filter_map(|c| fleetwright_kube::convert::nodeclaim(c).ok())
            .filter(|c| !self.snapshot.nodeclaims.iter().any(|s| s.name == c.name))
            .collect();
        self.snapshot.nodeclaims.extend(created);
    }

    /// A node whose reboot was committed this tick, fenced as it will be: the disruption decided
    /// after counts it as disrupted.
    fn fence(&mut self, node: &str) {
        let node = self.snapshot.nodes.iter_mut().find(|n| n.name == node);
        if let Some(node) = node {
            node.taints.push(fleetwright_core::model::Taint {
                key: fleetwright_core::labels::TAINT_REBOOTING.into(),
                value: String::new(),
                effect: fleetwright_core::model::TaintEffect::NoSchedule,
            });
        }
    }

    fn disrupt(&mut self) -> Decision {
        // A shadow tick compares the fleet with Fleetwright's plan every tick, whatever it
        // decides.
        if self.shadow && self.found.fleet.is_none() {
            if let Some(catalog) = self.catalog.clone() {
                self.record_fleet_cost(&catalog);
            }
        }
        // Capacity being provisioned for pods this tick planned waits for them; pods no pool
        // can take (a typo in a nodeSelector) hold nothing up.
        let waiting = self.found.pending_pods > self.found.unschedulable.len();
        if waiting || self.created_any {
            let pods = self.found.pending_pods
                - self.found.unschedulable.len().min(self.found.pending_pods);
            let creating = self.created_any;
            return Decision::Last(vec![Action::DisruptionWaits { pods, creating }]);
        }
        let catalog = match self.catalog() {
            Ok(c) => c,
            Err(d) => return d,
        };
        let (said, pending) = match self.take_input() {
            None => {
                let due = self.now.minute().is_multiple_of(FLEET_COST_MINUTES);
                if due && self.found.fleet.is_none() {
                    self.record_fleet_cost(&catalog);
                }
                return Decision::Read(Need::DisruptionState);
            }
            Some(Input::DisruptionState { said, pending }) => (said, pending),
            Some(_) => (BTreeMap::new(), Vec::new()),
        };
        let catalog = catalog.with_overlays(&self.snapshot.overlays);
        let started = std::time::Instant::now();
        // A pool that cannot launch takes no replacement, and its nodes are left alone.
        let parked = self.park();
        let decided = disruption::decide(
            self.dump,
            &mut self.snapshot,
            &catalog,
            &said,
            &pending,
            self.now,
        );
        isolation::restore(&mut self.snapshot, parked);
        debug!(
            target: TICK,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "disruption decided"
        );
        self.found.disruptions.extend(decided.keys);
        self.found.disruptions_started.extend(decided.started);
        let waits = decided
            .empty_settles_in
            .into_iter()
            .chain(decided.confirm_in);
        self.found.follow_up = waits.chain(self.found.follow_up).min();
        Decision::Actions(decided.actions)
    }

    /// Sets the fleet-cost gauges: the owned fleet's hourly cost and the LP bound on its
    /// workload.
    fn record_fleet_cost(&mut self, catalog: &Catalog) {
        let catalog = catalog.with_overlays(&self.snapshot.overlays);
        let cost = fleetwright_core::disruption::fleet_cost(
            &self.snapshot,
            &catalog,
            self.now.timestamp(),
        );
        debug!(
            target: TICK,
            nodes = cost.nodes,
            hourly = cost.hourly,
            lower_bound = cost.lower_bound,
            "fleet cost"
        );
        let m = &mut self.found.metrics;
        m.set(metrics::FLEET_HOURLY_COST, cost.hourly, metrics::Unit::None);
        m.set(
            metrics::FLEET_LOWER_BOUND,
            cost.lower_bound,
            metrics::Unit::None,
        );
        self.found.fleet = Some(cost);
    }

    fn deletions(&mut self) -> Decision {
        match self.take_input() {
            None => return Decision::Read(Need::Instances),
            Some(Input::Instances(owned)) => {
                let missing =
                    finish::missing_instances(&self.claims, &self.launched, &owned, self.now);
                self.owned = Some(Ok(owned));
                if !missing.is_empty() {
                    return Decision::Read(Need::Describe(missing));
                }
            }
            Some(Input::Described { asked, found }) => self.gone = finish::gone(&asked, &found),
            Some(Input::Failed(e)) => {
                self.owned = Some(Err(()));
                self.group_error.get_or_insert(e);
            }
            Some(_) => self.owned = None,
        }
        Decision::Actions(finish::deletions(
            self.dump,
            &self.claims,
            &self.gone,
            self.now,
        ))
    }

    fn statuses(&self) -> Vec<Action> {
        let classes = status::classes_ready(self.dump, self.resolved);
        let invalid = isolation::errors_of(&self.rejected, "NodePool");
        let mut out = decide::pool_statuses(self.dump, &self.claims, &classes, &invalid, self.now);
        out.extend(status::nodeclass_statuses(
            self.dump,
            self.resolved,
            self.now,
        ));
        out
    }

    fn garbage(&self) -> Decision {
        let Some(Ok(owned)) = &self.owned else {
            return Decision::Nothing;
        };
        let mut garbage = finish::garbage(&self.claims, &self.launched, owned, self.now);
        // An instance of a NodeClaim the read could not take is that NodeClaim's, not garbage.
        let unreadable = isolation::errors_of(&self.rejected, "NodeClaim");
        garbage.retain(|a| {
            !matches!(a, Action::CollectGarbage { nodeclaim: Some(n), .. } if unreadable.contains_key(n))
        });
        // Nor is an instance of another provider's (EKS Auto Mode's), whatever its tags say.
        let theirs = |id: &str| {
            let tags = owned.iter().find(|i| i.id == id).map(|i| &i.tags);
            tags.is_some_and(|t| self.dump.foreign.has_instance(id, t))
        };
        garbage.retain(
            |a| !matches!(a, Action::CollectGarbage { instance_id, .. } if theirs(instance_id)),
        );
        Decision::Actions(garbage)
    }

    fn save_unavailable(&mut self) -> Decision {
        match self.take_input() {
            None => Decision::Read(Need::Unavailable),
            Some(Input::Unavailable(mut offerings)) => {
                offerings.prune(self.now);
                Decision::Actions(vec![Action::SaveUnavailable { offerings }])
            }
            Some(_) => Decision::Nothing,
        }
    }

    fn report_rejected(&mut self) -> Decision {
        if self.rejected.is_empty() {
            return Decision::Nothing;
        }
        let said = match self.take_input() {
            None => return Decision::Read(Need::RejectedSaid),
            Some(Input::RejectedSaid(said)) => said,
            Some(_) => BTreeMap::new(),
        };
        Decision::Actions(isolation::report(&self.rejected, &said))
    }
}

/// Where the phase stands in [`super::PHASES`].
fn phase_index(phase: Phase) -> usize {
    super::PHASES
        .iter()
        .position(|p| *p == phase)
        .unwrap_or(usize::MAX)
}

/// The fleet's cost against the LP bound is measured on ticks in minutes divisible by this (a
/// plan of the whole workload from scratch: cheap, but not free at 50,000 pods).
const FLEET_COST_MINUTES: u32 = 5;

/// The scheduler's plan for the pending pods.
fn plan_pods(snapshot: &Snapshot, catalog: &Catalog, now: DateTime<Utc>) -> Plan {
    schedule(
        snapshot,
        catalog,
        &ScheduleOptions {
            now: now.timestamp(),
            plan_moving_pods: true,
            ..Default::default()
        },
    )
}

/// What the EC2NodeClasses resolve to now (AMIs, subnets, security groups), for drift. A class
/// that did not resolve this tick drifts nothing by them: its status may be older than the
/// nodes launched since (a status write that failed), and its pools launch nothing meanwhile.
fn drift_state(snapshot: &mut Snapshot, resolved: &status::Resolutions) {
    for (name, r) in resolved {
        let state = snapshot.node_class_state.entry(name.clone()).or_default();
        let Ok(r) = r else {
            state.images.clear();
            state.subnets.clear();
            state.security_groups.clear();
            continue;
        };
        state.images = r.amis.iter().map(|a| a.id.clone()).collect();
        state.subnets = r.subnets.iter().map(|s| s.id.clone()).collect();
        state.security_groups = r.security_groups.iter().cloned().collect();
        state.reservations = Some(r.reservations.iter().map(|c| c.id.clone()).collect());
        state.placement_group = Some(r.placement_group.as_ref().map(|p| p.id.clone()));
    }
}
