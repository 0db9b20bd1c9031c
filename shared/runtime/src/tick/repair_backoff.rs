//! The backoff of a `Ready` node's repair whose pre-spun replacements never initialized (a
//! broken AMI, a startup taint nothing removes): each such failure is recorded on the node's
//! NodeClaim, and its next repair waits, so a node whose replacements cannot come up does not
//! launch and delete a fleet every ten minutes. Pure: the NodeClaim and `now` in.

use chrono::{DateTime, Duration, Utc};
use fleetwright_crds::NodeClaim;

/// On the NodeClaim: `<n>@<RFC 3339>`, how many of its repairs in a row gave up on their
/// replacements, and when the last did.
pub const REPAIR_FAILED: &str = "fleetwright.io/repair-failed";

/// A failure recorded less than this ago is the one being given up on now (its abandon cut off
/// or refused, and tried again): a second failure comes no sooner than the first backoff (10
/// minutes) and a replacement's time to initialize (10 more) after it.
const RECORDED_JUST_NOW: Duration = Duration::minutes(15);

/// A record of failed repairs older than this is forgotten: the count starts again.
const FAILURES_FORGOTTEN: Duration = Duration::hours(24);

/// How long a repair waits after its `n`th failure in a row: 10 minutes, doubling, at most 2
/// hours.
pub fn backoff(n: u32) -> Duration {
    let minutes = 10i64.saturating_mul(1 << n.saturating_sub(1).min(4));
    Duration::minutes(minutes.min(120))
}

/// The failed repairs in a row the NodeClaim records, and when the last failed, unless the
/// record is forgotten.
fn failures(claim: &NodeClaim, now: DateTime<Utc>) -> Option<(u32, DateTime<Utc>)> {
    let mark = claim.metadata.annotations.as_ref()?.get(REPAIR_FAILED)?;
    let (n, at) = mark.split_once('@')?;
    let at = DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc);
    // A mark from the future (a skewed writer) holds nothing.
    let age = now - at;
    (age >= Duration::zero() && age < FAILURES_FORGOTTEN).then_some((n.parse().ok()?, at))
}

/// Why the next repair of the NodeClaim's (`Ready`) node waits, if it does.
pub fn waits(claim: &NodeClaim, now: DateTime<Utc>) -> Option<String> {
    let (n, at) = failures(claim, now)?;
    let until = at + backoff(n);
    (now < until).then(|| {
        format!(
            "the replacements of its last {n} repair(s) did not initialize; it tries again at {}",
            until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    })
}

/// The record of one more failure at `now`, unless this failure is recorded already.
pub fn next_mark(claim: &NodeClaim, now: DateTime<Utc>) -> Option<String> {
    let last = failures(claim, now);
    if last.is_some_and(|(_, at)| now - at < RECORDED_JUST_NOW) {
        return None;
    }
    let n = last.map_or(0, |(n, _)| n) + 1;
    let at = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Some(format!("{n}@{at}"))
}

#[cfg(test)]
#[path = "../../tests/unit/tick/repair_backoff.rs"]
mod tests;
