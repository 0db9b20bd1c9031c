//! The catalog embedded in the binary, so everything works offline: the instance types, the
//! per-zone offerings of [`EMBEDDED_REGIONS`], and us-east-1's on-demand price table, each
//! gzip-compressed.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::OnceLock;

use super::{parse_prices, Catalog, OnDemandPrices};

static EMBEDDED_TYPES: &[u8] = include_bytes!("../../data/describe-instance-types.json.gz");
/// The regions whose offerings are embedded.
pub const EMBEDDED_REGIONS: [&str; 4] = ["ap-northeast-2", "eu-west-1", "us-east-1", "us-west-2"];
static EMBEDDED_OFFERINGS: [&[u8]; 4] = [
    include_bytes!("../../data/instance-type-offerings-ap-northeast-2.json.gz"),
    include_bytes!("../../data/instance-type-offerings-eu-west-1.json.gz"),
    include_bytes!("../../data/instance-type-offerings-us-east-1.json.gz"),
    include_bytes!("../../data/instance-type-offerings-us-west-2.json.gz"),
];
static EMBEDDED_PRICES: &[u8] = include_bytes!("../../data/ondemand-prices-us-east-1.csv.gz");

/// The region of the embedded on-demand price table.
pub const EMBEDDED_PRICE_REGION: &str = "us-east-1";

impl Catalog {
    /// The embedded on-demand price table (us-east-1; used as the fallback for other regions).
    pub fn embedded_prices() -> BTreeMap<String, f64> {
        // Only the price table is read (not the whole catalog): the functions call this while
        // they start, and a cold start should not parse 1,395 instance types it may not need.
        parse_prices(&gunzip(EMBEDDED_PRICES)).expect("the embedded price table parses")
    }

    /// The us-east-1 catalog embedded in the binary (1,395 types, per-zone offerings, on-demand prices).
    pub fn embedded() -> &'static Catalog {
        Catalog::embedded_region("us-east-1").expect("us-east-1 is embedded")
    }

    /// The embedded catalog of one of [`EMBEDDED_REGIONS`]: its offerings, with us-east-1's
    /// on-demand prices. None for a region not embedded.
    pub fn embedded_region(region: &str) -> Option<&'static Catalog> {
        static CATALOGS: [OnceLock<Catalog>; 4] = [const { OnceLock::new() }; 4];
        let index = EMBEDDED_REGIONS.iter().position(|r| *r == region)?;
        Some(CATALOGS[index].get_or_init(|| {
            let types = gunzip(EMBEDDED_TYPES);
            let offerings = gunzip(EMBEDDED_OFFERINGS[index]);
            let prices = gunzip(EMBEDDED_PRICES);
            let mut catalog = Catalog::from_documents(region, &types, &offerings, &prices)
                .expect("the embedded catalog is valid");
            catalog.on_demand_prices = OnDemandPrices::Table(EMBEDDED_PRICE_REGION.into());
            catalog
        }))
    }
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("embedded data is valid gzip");
    out
}
