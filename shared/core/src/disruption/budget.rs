//! NodePool disruption budgets: how many of a pool's nodes may be disrupted at an instant, for
//! a reason. Budgets take `nodes` as a count or a percentage of the pool's nodes (rounded up),
//! an optional UTC cron `schedule` with a `duration` during which they apply, and optional
//! `reasons`. The most restrictive active budget wins; a pool without budgets gets Karpenter's
//! default of `10%`; a budget that cannot be read allows nothing. Nodes already being
//! disrupted (deleting or NotReady) count against the allowance. Time is an argument.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Budget, NodeClaim, NodePool, Snapshot};

use super::candidates::{disrupting, rebooting, Candidate};
use super::Blocked;

/// Why a node is disrupted, in the names budgets' `reasons` use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    Expired,
    Drifted,
    Empty,
    Underutilized,
    /// Node repair (Karpenter v1.15 paces it by the budgets under this reason).
    Unhealthy,
}

impl Reason {
    /// The name in `budgets[].reasons` and in the plan (`Empty` → `empty`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Reason::Expired => "expired",
            Reason::Drifted => "drifted",
            Reason::Empty => "empty",
            Reason::Underutilized => "underutilized",
            Reason::Unhealthy => "unhealthy",
        }
    }

    /// The reason named `text` (as [`Reason::as_str`] writes it).
    pub fn parse(text: &str) -> Option<Reason> {
        [
            Reason::Expired,
            Reason::Drifted,
            Reason::Empty,
            Reason::Underutilized,
            Reason::Unhealthy,
        ]
        .into_iter()
        .find(|r| r.as_str() == text)
    }

    fn budget_name(&self) -> &'static str {
        match self {
            Reason::Expired => "Expired",
            Reason::Drifted => "Drifted",
            Reason::Empty => "Empty",
            Reason::Underutilized => "Underutilized",
            Reason::Unhealthy => "Unhealthy",
        }
    }
}

/// Karpenter's default budget.
pub const DEFAULT_NODES: &str = "10%";

/// How many more of the pool's `total` nodes may be disrupted now for `reason`, given that
/// `disrupting` of them already are.
pub fn allowed(
    pool: &NodePool,
    reason: Reason,
    total: usize,
    disrupting: usize,
    now: i64,
) -> usize {
    let default = [Budget {
        nodes: DEFAULT_NODES.into(),
        ..Default::default()
    }];
    let budgets: &[Budget] = if pool.budgets.is_empty() {
        &default
    } else {
        &pool.budgets
    };
    // One budget that does not read stops every reason of the pool, whatever reasons it names:
    // Karpenter's `MustGetAllowedDisruptions` answers 0 on any budget's error.
    if budgets.iter().any(|b| !readable(b)) {
        return 0;
    }
    budgets
        .iter()
        .filter(|b| b.reasons.is_empty() || b.reasons.iter().any(|r| r == reason.budget_name()))
        .filter_map(|b| budget_nodes(b, total, now))
        .min()
        .unwrap_or(total)
        .saturating_sub(disrupting)
}

/// Whether a budget reads as Karpenter's does: a node count or percentage, and a schedule (with
/// a duration) that its cron parser takes.
fn readable(budget: &Budget) -> bool {
    let schedule = match (&budget.schedule, budget.duration) {
        (Some(s), Some(_)) => Cron::parse(s).is_some(),
        (None, None) => true,
        _ => false,
    };
    schedule && parse_nodes(&budget.nodes, 100).is_some()
}

/// The budget's node count if it is active now (`None` when its schedule is not active); an
/// unreadable budget allows 0.
fn budget_nodes(budget: &Budget, total: usize, now: i64) -> Option<usize> {
    if let Some(schedule) = &budget.schedule {
        let Some(cron) = Cron::parse(schedule) else {
            return Some(0);
        };
        let Some(duration) = budget.duration.filter(|d| *d > 0) else {
            return Some(0);
        };
        if !cron.active(now, duration) {
            return None;
        }
    }
    Some(parse_nodes(&budget.nodes, total).unwrap_or(0))
}

/// `"3"` → 3; `"25%"` of 10 → 3 (rounded up).
pub fn parse_nodes(text: &str, total: usize) -> Option<usize> {
    let text = text.trim();
    match text.strip_suffix('%') {
        Some(pct) => {
            let pct: usize = pct.trim().parse().ok().filter(|p| *p <= 100)?;
            Some((total * pct).div_ceil(100))
        }
        None => text.parse().ok(),
    }
}

/// A standard five-field cron expression (minute, hour, day of month, month, day of week), in
/// UTC, or one of the `@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly` macros.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: Vec<bool>,
    hours: Vec<bool>,
    days: Vec<bool>,
    months: Vec<bool>,
    weekdays: Vec<bool>,
    /// Cron's rule: when both day fields are restricted, either may match.
    days_restricted: bool,
    weekdays_restricted: bool,
}

/// The longest look-back when checking whether a schedule is active (a year of minutes).
const MAX_LOOKBACK_MINUTES: i64 = 366 * 24 * 60;

impl Cron {
    pub fn parse(text: &str) -> Option<Cron> {
        let expanded = match text.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [m, h, dom, mon, dow] = fields[..] else {
            return None;
        };
        let dow = names_to_numbers(dow, &WEEKDAY_NAMES, 0);
        let mon = names_to_numbers(mon, &MONTH_NAMES, 1);
        // 0–6, as Karpenter's parser (robfig/cron) reads it: a 7 for Sunday fails its parse,
        // and so the budget fails closed there too.
        let weekdays = field(&dow, 0, 6)?;
        Some(Cron {
            minutes: field(m, 0, 59)?,
            hours: field(h, 0, 23)?,
            days: field(dom, 1, 31)?,
            months: field(&mon, 1, 12)?,
            weekdays,
            days_restricted: dom != "*",
            weekdays_restricted: dow != "*",
        })
    }

    /// Whether the expression fires at the minute starting at `t` (seconds since the epoch).
    pub fn matches(&self, t: i64) -> bool {
        let (_, month, day) = civil_from_days(t.div_euclid(86_400));
        let seconds = t.rem_euclid(86_400);
        let (hour, minute) = ((seconds / 3600) as usize, ((seconds % 3600) / 60) as usize);
        let weekday = (t.div_euclid(86_400) + 4).rem_euclid(7) as usize;
        let day_ok = match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => self.days[day] || self.weekdays[weekday],
            _ => self.days[day] && self.weekdays[weekday],
        };
        self.minutes[minute] && self.hours[hour] && self.months[month] && day_ok
    }

    /// Whether a firing in the last `duration` seconds (this minute included) is still open.
    pub fn active(&self, now: i64, duration: i64) -> bool {
        let this_minute = now - now.rem_euclid(60);
        let lookback = (duration / 60).min(MAX_LOOKBACK_MINUTES);
        (0..=lookback)
            .map(|k| this_minute - k * 60)
            .any(|t| now < t + duration && self.matches(t))
    }
}

const WEEKDAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const MONTH_NAMES: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// `MON-FRI` → `1-5`: three-letter names, in any case, become their numbers.
fn names_to_numbers(text: &str, names: &[&str], first: usize) -> String {
    let mut out = text.to_ascii_lowercase();
    for (i, name) in names.iter().enumerate() {
        out = out.replace(name, &(i + first).to_string());
    }
    out
}

/// One cron field over `min..=max`: `*`, numbers, `a-b` ranges, `/step`, and comma lists.
fn field(text: &str, min: usize, max: usize) -> Option<Vec<bool>> {
    let mut set = vec![false; max + 1];
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, s.parse::<usize>().ok().filter(|s| *s > 0)?),
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (a.parse().ok()?, b.parse().ok()?)
        } else {
            let v: usize = range.parse().ok()?;
            (v, if step > 1 { max } else { v })
        };
        if lo < min || hi > max || lo > hi {
            return None;
        }
        for v in (lo..=hi).step_by(step) {
            set[v] = true;
        }
    }
    Some(set)
}

/// Days since 1970-01-01 → (year, month 1–12, day 1–31), in the proleptic Gregorian calendar.
fn civil_from_days(days: i64) -> (i64, usize, usize) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as usize;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as usize;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Per-pool allowances for one reason, handed out in order.
pub(crate) struct Budgets<'a> {
    pub(crate) now: i64,
    /// Each pool's total and disrupting nodes, counted once ([`Budgets::new`]).
    counts: BTreeMap<&'a str, Count>,
}

/// A pool's nodes as its budget counts them.
#[derive(Clone, Copy, Default)]
struct Count {
    total: usize,
    disrupting: usize,
}

impl<'a> Budgets<'a> {
    /// Counts each pool's nodes as Karpenter does: a node whose NodeClaim has not initialized is
    /// no part of the pool's total (it neither raises a percentage nor takes a slot), but for a
    /// rebooting one; a node that is deleting, going (its NodeClaim is being deleted, or expires
    /// now, so the tick deletes it this minute), disrupted, rebooting or not Ready takes a slot.
    /// A node of the pool whose NodeClaim the read lacks (one that did not read, say) takes a
    /// slot too and adds nothing to the total: what it is doing is unknown, so the budget fails
    /// closed.
    pub(crate) fn new(snapshot: &'a Snapshot, now: i64) -> Self {
        let claims = |keep: &dyn Fn(&NodeClaim) -> bool| -> BTreeSet<&'a str> {
            (snapshot.nodeclaims.iter())
                .filter(|c| keep(c))
                .flat_map(NodeClaim::node_keys)
                .collect()
        };
        let managed = claims(&|_| true);
        // By provider ID too: a node may be Ready before its NodeClaim's `nodeName` is written.
        let starting = claims(&|c| !c.initialized);
        let going = claims(&|c| c.deleting || super::candidates::expires(c, now));
        let mut counts: BTreeMap<&str, Count> = BTreeMap::new();
        for node in &snapshot.nodes {
            let Some(pool) = node.nodepool() else {
                continue;
            };
            let count = counts.entry(pool).or_default();
            if !node.is_in(&managed) {
                count.disrupting += 1;
                continue;
            }
            if node.is_in(&starting) && !rebooting(node) {
                continue;
            }
            count.total += 1;
            let taken = node.deleting || !node.ready || disrupting(node) || node.is_in(&going);
            count.disrupting += usize::from(taken);
        }
        Budgets { now, counts }
    }

    /// How many more nodes of `pool` may be disrupted for `reason` ([`Budgets::new`] says how
    /// its nodes count).
    pub(crate) fn allowance(&self, pool: &NodePool, reason: Reason) -> usize {
        let count = self
            .counts
            .get(pool.name.as_str())
            .copied()
            .unwrap_or_default();
        allowed(pool, reason, count.total, count.disrupting, self.now)
    }

    /// The candidates, in order, that fit in their pools' allowances; the others are blocked.
    pub(crate) fn take<'c>(
        &self,
        candidates: &[&'c Candidate<'a>],
        reason: Reason,
        blocked: &mut Vec<Blocked>,
    ) -> Vec<&'c Candidate<'a>> {
        let mut left: BTreeMap<&str, usize> = BTreeMap::new();
        let mut out = Vec::new();
        for c in candidates {
            let n = left
                .entry(c.pool.name.as_str())
                .or_insert_with(|| self.allowance(c.pool, reason));
            if *n == 0 {
                blocked.push(Blocked {
                    node: c.node.name.clone(),
                    reason: format!(
                        "{} disruption budget of NodePool {} allows no more nodes now",
                        reason.as_str(),
                        c.pool.name
                    ),
                });
                continue;
            }
            *n -= 1;
            out.push(*c);
        }
        out
    }
}

#[cfg(test)]
#[path = "../../tests/unit/disruption/budget.rs"]
mod tests;
