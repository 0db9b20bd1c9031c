//! The removal of columns another column beats for every group that may use them, which keeps
//! the program small without raising its optimum. It reads both the columns and the groups
//! made from them, so it sits apart from both.

use std::collections::BTreeMap;

use crate::columns::Column;
use crate::groups::{requested, Group};

/// The columns left after dropping each column that another column with the same users beats:
/// no dearer and at least as large (always safe), or, when no user must have a node to itself,
/// at least as much of every resource per dollar (fractional nodes of it then do the same work
/// for no more). Columns no group may use go too.
pub(crate) fn pruned(columns: Vec<Column>, groups: &[Group]) -> Vec<Column> {
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); columns.len()];
    for (g, group) in groups.iter().enumerate() {
        for &j in &group.allowed {
            users[j].push(g);
        }
    }
    let names = requested(groups);
    let mut by_users: BTreeMap<Vec<usize>, Vec<usize>> = BTreeMap::new();
    for (j, u) in users.iter().enumerate() {
        if !u.is_empty() {
            by_users.entry(u.clone()).or_default().push(j);
        }
    }
    let mut keep = vec![false; columns.len()];
    for (u, members) in by_users {
        let per_dollar = u.iter().all(|&g| !groups[g].alone);
        for j in frontier(&columns, members, &names, per_dollar) {
            keep[j] = true;
        }
    }
    columns
        .into_iter()
        .zip(keep)
        .filter_map(|(c, k)| k.then_some(c))
        .collect()
}

/// The members no other member beats.
fn frontier(
    columns: &[Column],
    mut members: Vec<usize>,
    names: &[String],
    per_dollar: bool,
) -> Vec<usize> {
    members.sort_by(|&a, &b| {
        columns[a]
            .price
            .total_cmp(&columns[b].price)
            .then(a.cmp(&b))
    });
    let mut kept: Vec<usize> = Vec::new();
    for j in members {
        let c = &columns[j];
        let beaten = kept.iter().any(|&k| {
            let k = &columns[k];
            names.iter().all(|n| k.capacity.get(n) >= c.capacity.get(n))
        });
        if !beaten {
            kept.push(j);
        }
    }
    if !per_dollar {
        return kept;
    }
    let rate = |j: usize, n: &str| columns[j].capacity.get(n) as f64 / columns[j].price;
    let better = |k: usize, j: usize| {
        names.iter().all(|n| rate(k, n) >= rate(j, n))
            && names.iter().any(|n| rate(k, n) > rate(j, n))
    };
    kept.iter()
        .copied()
        .filter(|&j| {
            columns[j].price <= 0.0
                || !kept
                    .iter()
                    .any(|&k| k != j && columns[k].price > 0.0 && better(k, j))
        })
        .collect()
}
