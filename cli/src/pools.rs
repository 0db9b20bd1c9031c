//! What each NodePool of a dump could launch, for `plan`'s notes: the instance types its
//! requirements allow and their price range, or why none is left; and the capacity
//! reservations a dump lists with no count, which it cannot plan with.

/// What the summary of a NodePool whose requirements leave no type says.
pub const NO_TYPE: &str = "allows no instance type";

/// What each NodePool could launch: how many instance types its
/// requirements allow, the cheapest and dearest of them, and their price range.
pub fn summary(
    snapshot: &fleetwright_core::Snapshot,
    catalog: &fleetwright_core::Catalog,
) -> Vec<String> {
    snapshot
        .nodepools
        .iter()
        .map(|pool| {
            let settings = snapshot.node_class_settings(pool);
            let reqs = pool.node_requirements();
            let all = catalog.instance_types_shared(&settings);
            let mut priced: Vec<(String, f64)> = all
                .iter()
                .filter(|t| reqs.compatible(&t.requirements).is_ok())
                .filter_map(|t| Some((t.name.clone(), t.cheapest_offering(&reqs)?.price)))
                .collect();
            priced.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            match (priced.first(), priced.last()) {
                (Some(low), Some(high)) => format!(
                    "no pod to plan; nodepool {:?} allows {} instance type(s), from {} at ${:.4}/h to {} at ${:.4}/h",
                    pool.name,
                    priced.len(),
                    low.0,
                    low.1,
                    high.0,
                    high.1
                ),
                _ => format!(
                    "nodepool {:?} {NO_TYPE}: {}",
                    pool.name,
                    fleetwright_core::scheduler::emptied_by(&reqs, (&all, &settings), catalog)
                ),
            }
        })
        .collect()
}

/// A note for each EC2NodeClass whose status lists capacity reservations without
/// `availableInstanceCount`: Karpenter writes none (it asks EC2 for the count), and a dump has
/// no EC2 to ask, so the plan takes none of them, and says how to plan with them.
pub fn uncounted_reservations(dump: &fleetwright_kube::dump::ClusterDump) -> Vec<String> {
    dump.nodeclasses
        .iter()
        .filter_map(|class| {
            let listed = &class.status.as_ref()?.capacity_reservations;
            let uncounted: Vec<&str> = listed
                .iter()
                .filter(|r| r.available_instance_count.is_none())
                .map(|r| r.id.as_str())
                .collect();
            (!uncounted.is_empty()).then(|| {
                format!(
                    "ec2nodeclass {:?} lists capacity reservation(s) {} without status.capacityReservations[].availableInstanceCount (Karpenter asks EC2 for it and writes none): the plan launches into none of them; add each reservation's count (`aws ec2 describe-capacity-reservations`) to plan with them (the status Fleetwright's tick keeps has it)",
                    class.metadata.name.as_deref().unwrap_or_default(),
                    uncounted.join(", ")
                )
            })
        })
        .collect()
}
