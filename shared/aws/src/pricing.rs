//! Prices. On-demand comes from the embedded table (the one the core ships). Spot comes from
//! DescribeSpotPriceHistory for Linux, per instance type and zone, refreshed every 12 hours in a
//! warm container; until the first refresh, spot is priced as on-demand.

use std::collections::BTreeMap;

use aws_sdk_ec2::primitives::DateTime as SmithyDateTime;
use chrono::{DateTime, Duration, Utc};
use fleetwright_core::Catalog;
use tracing::{debug, instrument};

use crate::error::AwsError;

/// How often a warm container refreshes spot prices.
pub const SPOT_REFRESH: Duration = Duration::hours(12);
/// The product descriptions Linux nodes are priced under (classic and VPC).
pub const PRODUCT_DESCRIPTIONS: [&str; 2] = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"];

/// Spot prices by (instance type, zone).
pub type SpotPrices = BTreeMap<(String, String), f64>;

/// The current spot price of every Linux offering: the newest history entry per type and zone.
#[instrument(skip_all)]
pub async fn spot_prices(
    ec2: &aws_sdk_ec2::Client,
    now: DateTime<Utc>,
) -> Result<SpotPrices, AwsError> {
    let mut pages = ec2
        .describe_spot_price_history()
        .set_product_descriptions(Some(
            PRODUCT_DESCRIPTIONS.iter().map(|s| s.to_string()).collect(),
        ))
        .start_time(SmithyDateTime::from_secs(now.timestamp()))
        .max_results(1000)
        .into_paginator()
        .send();
    let mut newest: BTreeMap<(String, String), (i64, f64)> = BTreeMap::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| crate::error::api("DescribeSpotPriceHistory", e))?;
        for entry in page.spot_price_history() {
            let (Some(t), Some(zone), Some(price)) = (
                entry.instance_type(),
                entry.availability_zone(),
                entry.spot_price().and_then(|p| p.parse::<f64>().ok()),
            ) else {
                continue;
            };
            let at = entry.timestamp().map(|t| t.secs()).unwrap_or(0);
            let key = (t.as_str().to_string(), zone.to_string());
            match newest.get(&key) {
                Some((seen, _)) if *seen >= at => {}
                _ => {
                    newest.insert(key, (at, price));
                }
            }
        }
    }
    debug!(offerings = newest.len(), "spot prices refreshed");
    Ok(newest.into_iter().map(|(k, (_, p))| (k, p)).collect())
}

/// Applies spot prices to a catalog. Offerings without a price keep the catalog's fallback.
pub fn apply_spot_prices(catalog: &mut Catalog, prices: &SpotPrices) {
    catalog.spot = prices.clone();
    catalog.spot_prices_read = true;
}
