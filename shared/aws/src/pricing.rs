//! Prices, read as Karpenter reads them and refreshed every 12 hours in a warm container.
//! On-demand comes from the AWS Price List API (GetProducts: Linux, shared tenancy and bare metal,
//! no pre-installed software, for the cluster's region), with the embedded table as the fallback
//! for any type the list does not price or when the API cannot be reached. Spot comes from
//! DescribeSpotPriceHistory for Linux, per instance type and zone; until the first refresh, spot
//! is priced as on-demand.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_sdk_ec2::primitives::DateTime as SmithyDateTime;
use aws_sdk_pricing::types::{Filter, FilterType};
use chrono::{DateTime, Duration, Utc};
use fleetwright_core::catalog::OnDemandPrices;
use fleetwright_core::Catalog;
use serde::Deserialize;
use tracing::{debug, instrument, warn};

use crate::error::AwsError;

/// How often a warm container refreshes spot and on-demand prices.
pub const SPOT_REFRESH: Duration = Duration::hours(12);
/// How long a container waits to ask the Price List API again after it failed (an isolated VPC
/// has no route to it; each tick should not pay for that).
pub const PRICE_LIST_RETRY: Duration = Duration::hours(1);
/// The product descriptions Linux nodes are priced under (classic and VPC).
pub const PRODUCT_DESCRIPTIONS: [&str; 2] = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"];

/// Spot prices by (instance type, zone).
pub type SpotPrices = BTreeMap<(String, String), f64>;

/// The prices a warm container keeps between invocations, each with when it was read.
#[derive(Debug, Default)]
pub struct WarmPrices(Mutex<Kept>);

#[derive(Debug, Default)]
struct Kept {
    spot: Option<(Arc<SpotPrices>, DateTime<Utc>)>,
    on_demand: Option<(Arc<OnDemandPriceList>, DateTime<Utc>)>,
    /// When the Price List API last failed; it is not asked again for [`PRICE_LIST_RETRY`].
    on_demand_failed: Option<DateTime<Utc>>,
}

impl WarmPrices {
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spot prices, refreshed every [`SPOT_REFRESH`]; on failure the previous ones, or none
    /// (spot is then priced as on-demand).
    pub async fn spot(
        &self,
        ec2: &aws_sdk_ec2::Client,
        now: DateTime<Utc>,
    ) -> Option<Arc<SpotPrices>> {
        let cached = self.kept().spot.clone();
        if let Some((prices, at)) = &cached {
            if now - *at < SPOT_REFRESH {
                return Some(prices.clone());
            }
        }
        match spot_prices(ec2, now).await {
            Ok(prices) => {
                let prices = Arc::new(prices);
                self.kept().spot = Some((prices.clone(), now));
                Some(prices)
            }
            Err(e) => {
                warn!(error = %e, "spot price refresh failed; keeping the previous prices");
                cached.map(|(p, _)| p)
            }
        }
    }

    /// The Price List API's on-demand prices, refreshed every [`SPOT_REFRESH`]; on failure the
    /// previous ones, or none (the embedded table prices the catalog).
    pub async fn on_demand(
        &self,
        client: &aws_sdk_pricing::Client,
        region: &str,
        now: DateTime<Utc>,
    ) -> Option<Arc<OnDemandPriceList>> {
        let (cached, failed) = {
            let kept = self.kept();
            (kept.on_demand.clone(), kept.on_demand_failed)
        };
        let fresh = cached.as_ref().filter(|(_, at)| now - *at < SPOT_REFRESH);
        let waiting = failed.is_some_and(|at| now - at < PRICE_LIST_RETRY);
        if fresh.is_some() || waiting {
            return cached.map(|(p, _)| p);
        }
        match on_demand_prices(client, region).await {
            Ok(prices) => {
                let prices = Arc::new(prices);
                let mut kept = self.kept();
                kept.on_demand = Some((prices.clone(), now));
                kept.on_demand_failed = None;
                Some(prices)
            }
            Err(e) => {
                warn!(error = %e, "Price List API read failed; on-demand prices stay as they were");
                self.kept().on_demand_failed = Some(now);
                cached.map(|(p, _)| p)
            }
        }
    }
}

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

/// On-demand prices by instance type, from the Price List API.
pub type OnDemandPriceList = BTreeMap<String, f64>;

/// More pages than any region has (about ten of 100 products each): a listing that runs on is
/// cut off rather than read forever.
const MAX_PAGES: usize = 100;
/// How long the first listing may take before the second is not started.
const PRICE_LIST_BUDGET: std::time::Duration = std::time::Duration::from_secs(8);
/// How far a listed price may stray from the embedded us-east-1 one (either way) and still be
/// believed: regions and currencies differ by far less, a broken document by far more.
const PLAUSIBLE_FACTOR: f64 = 50.0;

/// The region whose Price List API endpoint serves `region`: the API runs in a few regions only.
pub fn price_list_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// The currency a region is priced in.
fn currency(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "CNY"
    } else {
        "USD"
    }
}

/// The on-demand price of every Linux instance type in `region`: shared-tenancy compute instances
/// and bare-metal ones, each a paginated GetProducts. An empty answer is an error: a region the
/// list knows always has prices, so an empty one means the filters or the endpoint are wrong.
#[instrument(skip_all, fields(region = %region))]
pub async fn on_demand_prices(
    client: &aws_sdk_pricing::Client,
    region: &str,
) -> Result<OnDemandPriceList, AwsError> {
    if region.starts_with("us-gov-") || region.starts_with("us-iso") {
        return Err(no_prices(format!(
            "the Price List API does not serve {region}"
        )));
    }
    let started = std::time::Instant::now();
    let mut prices = products(client, region, "Shared", "Compute Instance").await?;
    if started.elapsed() > PRICE_LIST_BUDGET {
        return Err(no_prices(
            "the Price List API is too slow to read in a tick".into(),
        ));
    }
    let metal = products(client, region, "Dedicated", "Compute Instance (bare metal)").await?;
    if prices.is_empty() || metal.is_empty() {
        return Err(no_prices(format!(
            "the Price List API returned no on-demand prices for {region}"
        )));
    }
    prices.extend(metal);
    debug!(types = prices.len(), "on-demand prices read");
    Ok(prices)
}

fn no_prices(message: String) -> AwsError {
    AwsError::Api {
        operation: "GetProducts",
        code: "NoPrices".into(),
        message,
    }
}

fn term(field: &str, value: &str) -> Option<Filter> {
    Filter::builder()
        .r#type(FilterType::TermMatch)
        .field(field)
        .value(value)
        .build()
        .ok()
}

async fn products(
    client: &aws_sdk_pricing::Client,
    region: &str,
    tenancy: &str,
    family: &str,
) -> Result<OnDemandPriceList, AwsError> {
    let filters = [
        ("regionCode", region),
        ("serviceCode", "AmazonEC2"),
        ("preInstalledSw", "NA"),
        ("operatingSystem", "Linux"),
        ("capacitystatus", "Used"),
        ("marketoption", "OnDemand"),
        ("tenancy", tenancy),
        ("productFamily", family),
    ];
    let mut pages = client
        .get_products()
        .service_code("AmazonEC2")
        .set_filters(Some(
            filters.iter().filter_map(|(f, v)| term(f, v)).collect(),
        ))
        .max_results(100)
        .into_paginator()
        .send();
    let mut out = OnDemandPriceList::new();
    let mut read = 0;
    while let Some(page) = pages.next().await {
        read += 1;
        if read > MAX_PAGES {
            return Err(no_prices(format!(
                "the Price List API gave more than {MAX_PAGES} pages for {region}"
            )));
        }
        let page = page.map_err(|e| crate::error::api("GetProducts", e))?;
        for item in page.price_list() {
            if let Some((instance_type, price)) = price_item(item, currency(region)) {
                out.insert(instance_type, price);
            }
        }
    }
    Ok(out)
}

/// The parts of a Price List product document that price an instance type.
#[derive(Deserialize)]
struct PriceItem {
    product: Product,
    #[serde(default)]
    terms: Terms,
}

#[derive(Deserialize)]
struct Product {
    #[serde(default)]
    attributes: BTreeMap<String, String>,
}

#[derive(Default, Deserialize)]
struct Terms {
    #[serde(default, rename = "OnDemand")]
    on_demand: BTreeMap<String, Term>,
}

#[derive(Deserialize)]
struct Term {
    #[serde(default, rename = "priceDimensions")]
    price_dimensions: BTreeMap<String, Dimension>,
}

#[derive(Deserialize)]
struct Dimension {
    #[serde(default, rename = "pricePerUnit")]
    price_per_unit: BTreeMap<String, String>,
}

/// One product document's instance type and hourly price in `currency`. Documents that do not
/// parse, name no instance type or carry no non-zero price are skipped, one at a time.
pub fn price_item(document: &str, currency: &str) -> Option<(String, f64)> {
    let item: PriceItem = serde_json::from_str(document).ok()?;
    let instance_type = item.product.attributes.get("instanceType")?.clone();
    if instance_type.is_empty() {
        return None;
    }
    let price = item
        .terms
        .on_demand
        .values()
        .flat_map(|t| t.price_dimensions.values())
        .filter_map(|d| d.price_per_unit.get(currency)?.parse::<f64>().ok())
        .rfind(|p| *p > 0.0)?;
    Some((instance_type, price))
}

/// Applies Price List prices to a catalog priced by the embedded us-east-1 table. A listed
/// type takes the list's price when it is plausible (finite, positive, within
/// [`PLAUSIBLE_FACTOR`] of the table's); any other type takes the table's price scaled by the
/// median ratio of the region's prices to the table's, so that an unlisted type is neither
/// cheaper nor dearer than its neighbours for being unlisted (and is in the region's currency).
pub fn apply_on_demand_prices(catalog: &mut Catalog, prices: &OnDemandPriceList) {
    let table = std::mem::take(&mut catalog.on_demand);
    let believed: BTreeMap<&String, f64> = prices
        .iter()
        .filter(|(t, p)| plausible(**p, table.get(*t).copied()))
        .map(|(t, p)| (t, *p))
        .collect();
    let mut ratios: Vec<f64> = believed
        .iter()
        .filter_map(|(t, p)| Some(p / table.get(*t).filter(|v| **v > 0.0)?))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let scale = ratios.get(ratios.len() / 2).copied().unwrap_or(1.0);
    let mut priced: BTreeMap<String, f64> =
        table.iter().map(|(t, p)| (t.clone(), p * scale)).collect();
    priced.extend(believed.into_iter().map(|(t, p)| (t.clone(), p)));
    catalog.on_demand = priced;
    catalog.on_demand_prices = OnDemandPrices::PriceList;
}

fn plausible(price: f64, table: Option<f64>) -> bool {
    price.is_finite()
        && price > 0.0
        && table.is_none_or(|t| price >= t / PLAUSIBLE_FACTOR && price <= t * PLAUSIBLE_FACTOR)
}

#[cfg(test)]
#[path = "../tests/unit/pricing.rs"]
mod tests;
