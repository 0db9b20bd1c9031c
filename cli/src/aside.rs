//! Objects a verb sets aside: the dump's snapshot without the objects that do not read, each
//! named with its field; the NodePools left out for their EC2NodeClass; and the reason the pods
//! they leave pending are given.

use fleetwright_kube::rejected::Rejected;

/// The dump's snapshot, without the objects that do not read, as the tick takes it. Each is
/// named with its field, all of them at once, and the command exits non-zero once it has printed
/// what the rest gives (a live read leaves them out with a warning, as the tick does). An
/// EC2NodeClass that does not read is taken for not ready: its NodePools are planned without.
/// Returns the NodePools set aside too, so that the pods they leave pending can say so.
pub(crate) fn readable_snapshot(
    dump: &mut fleetwright_kube::dump::ClusterDump,
    source: &str,
) -> anyhow::Result<(fleetwright_core::Snapshot, Vec<Rejected>)> {
    let (mut snapshot, mut rejected) = fleetwright_kube::convert::take_snapshot_isolating(dump);
    fleetwright_runtime::tick::status_settings(dump, &mut snapshot);
    for r in rejected.iter().filter(|r| r.kind == "EC2NodeClass") {
        set_not_ready(dump, &r.name, &r.error);
    }
    if !dump.slim {
        rejected.retain(|r| {
            if r.kind != "EC2NodeClass" {
                return true;
            }
            eprintln!(
                "error: {source}: {}; its NodePools are not planned, as the tick plans without them",
                r.error
            );
            crate::input::set_aside();
            false
        });
    }
    // A live cluster is planned as the tick plans it: without the objects that do not read.
    for r in rejected.iter().filter(|_| dump.slim) {
        eprintln!(
            "warning: {source}: left out, as the tick leaves it out: {}",
            r.error
        );
    }
    for r in rejected.iter().filter(|_| !dump.slim) {
        let then = match r.kind.as_str() {
            "document" => "the other documents are still read",
            "PodDisruptionBudget" => "read as allowing no eviction ever, so its pods stay held",
            "Pod" => {
                "left out of the plan (one bound to a node keeps that node from being disrupted)"
            }
            _ => "left out, as the tick leaves it out",
        };
        eprintln!("error: {source}: {}; {then}", r.error);
        crate::input::set_aside();
    }
    // The ignored keys come after the objects set aside, so that `--strict` stops with every
    // problem of the input named, not the keys alone.
    crate::input::check_dump(dump, &rejected)?;
    rejected.retain(|r| r.kind == "NodePool");
    Ok((snapshot, rejected))
}

/// Karpenter's validation of the classes' kubelet expressions against every instance type of
/// the catalog: a class whose expression fails for one is not ready (its NodePools are not
/// planned), and the error names the class, the field and the type.
pub(crate) fn check_kubelet_expressions(
    dump: &mut fleetwright_kube::dump::ClusterDump,
    snapshot: &fleetwright_core::Snapshot,
    catalog: &fleetwright_core::Catalog,
    source: &str,
) {
    for (name, settings) in &snapshot.node_classes {
        if let Err(e) = catalog.check_kubelet(&settings.kubelet) {
            let error = format!("EC2NodeClass {name}: field {e}");
            eprintln!(
                "error: {source}: {error}; its NodePools are not planned, as Karpenter launches nothing from it"
            );
            if !dump.slim {
                crate::input::set_aside();
            }
            set_not_ready(dump, name, &error);
        }
    }
}

/// Marks an EC2NodeClass of the dump not ready, as the tick marks one it cannot use.
fn set_not_ready(dump: &mut fleetwright_kube::dump::ClusterDump, name: &str, message: &str) {
    let Some(class) = dump
        .nodeclasses
        .iter_mut()
        .find(|c| c.metadata.name.as_deref() == Some(name))
    else {
        return;
    };
    let status = class.status.get_or_insert_with(Default::default);
    status
        .conditions
        .retain(|c| c.type_ != fleetwright_crds::conditions::READY);
    status.conditions.push(fleetwright_crds::Condition {
        type_: fleetwright_crds::conditions::READY.into(),
        status: "False".into(),
        reason: Some("ValidationFailed".into()),
        message: Some(message.into()),
        last_transition_time: None,
        observed_generation: None,
    });
}

/// Names each NodePool left out of the plan for its EC2NodeClass ([`report_parked`]), and says
/// so in the reason of every pod left pending, with the NodePools set aside because they do not
/// read: a pod meant for one of those would otherwise be told only why the others refuse it.
pub(crate) fn name_parked(
    input: (&fleetwright_kube::dump::ClusterDump, &str),
    (parked, set_aside): (&[fleetwright_core::model::NodePool], &[Rejected]),
    none_left: bool,
    plan: &mut fleetwright_core::Plan,
) {
    let why: Vec<String> = parked
        .iter()
        .map(|p| report_parked(input, p))
        .chain(set_aside.iter().map(set_aside_reason))
        .collect();
    if why.is_empty() {
        return;
    }
    let why = why.join("; ");
    for pod in &mut plan.unschedulable {
        pod.reason = if none_left {
            why.clone()
        } else {
            format!("{}; {why}", pod.reason)
        };
    }
}

/// Prints why a NodePool is not planned, and returns it as a reason. In a file, a class the
/// input lacks is bad input (the command exits non-zero after its output, as for any object set
/// aside); a class that is not ready, or one a live cluster lacks, is the cluster's state: a
/// warning.
pub(crate) fn report_parked(
    (dump, source): (&fleetwright_kube::dump::ClusterDump, &str),
    pool: &fleetwright_core::model::NodePool,
) -> String {
    let missing = !dump
        .nodeclasses
        .iter()
        .any(|c| c.metadata.name.as_deref() == Some(pool.node_class.as_str()));
    let state = if missing { "missing" } else { "not ready" };
    let line = if pool.node_class.is_empty() {
        format!(
            "NodePool {:?}: spec.template.spec.nodeClassRef: required (the EC2NodeClass its nodes launch with), so the NodePool is not planned",
            pool.name
        )
    } else {
        format!(
            "NodePool {:?}: spec.template.spec.nodeClassRef.name: EC2NodeClass {:?} is {state}, so the NodePool is not planned",
            pool.name, pool.node_class
        )
    };
    if missing && !dump.slim {
        eprintln!("error: {source}: {line}");
        crate::input::set_aside();
    } else {
        eprintln!("warning: {source}: {line}");
    }
    match pool.node_class.is_empty() {
        true => format!(
            "nodepool {:?} is not planned: it names no EC2NodeClass (spec.template.spec.nodeClassRef)",
            pool.name
        ),
        false => format!(
            "nodepool {:?} is not planned: its EC2NodeClass {:?} is {state}",
            pool.name, pool.node_class
        ),
    }
}

/// Why a NodePool that does not read plans nothing, for the pods it leaves pending and for
/// `explain`.
pub(crate) fn set_aside_reason(pool: &Rejected) -> String {
    format!(
        "nodepool {:?} is not planned: it does not read ({})",
        pool.name, pool.error
    )
}
