//! Catalog flags shared by verbs: the embedded catalog of a region, or the three AWS documents.
//! Without `--region`, the region is the one the cluster dump points at (its nodes' zone labels
//! and providerIDs, its NodeClaims, its NodePools' zone requirements, its EC2NodeClasses' subnet
//! zones), else us-east-1.

use std::borrow::Cow;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use fleetwright_core::catalog::EMBEDDED_REGIONS;
use fleetwright_core::{Catalog, Snapshot};

/// The region when neither `--region` nor the dump names one.
pub const DEFAULT_REGION: &str = "us-east-1";

#[derive(Debug, Args)]
pub struct CatalogArgs {
    /// `aws ec2 describe-instance-types` output (JSON).
    #[arg(long, value_name = "FILE")]
    pub instance_types: Option<PathBuf>,
    /// `aws ec2 describe-instance-type-offerings --location-type availability-zone` output (JSON).
    #[arg(long, value_name = "FILE")]
    pub offerings: Option<PathBuf>,
    /// On-demand prices: CSV `instance_type,usd_per_hour` or a JSON object.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Region of the catalog (embedded: ap-northeast-2, eu-west-1, us-east-1, us-west-2).
    /// Default: the region the dump's zone labels, providerIDs, NodePool zone requirements and
    /// EC2NodeClass subnet zones point at, else us-east-1.
    #[arg(long)]
    pub region: Option<String>,
}

impl CatalogArgs {
    /// The region to plan in, and why: `--region`, the dump's, or the default.
    pub fn region(&self, snapshot: Option<&Snapshot>) -> (String, String) {
        if let Some(region) = &self.region {
            return (region.clone(), "--region".into());
        }
        match snapshot.and_then(fleetwright_core::region::infer) {
            Some(inferred) => {
                if !inferred.others.is_empty() {
                    tracing::warn!(region = %inferred.region, others = ?inferred.others, "the dump names more than one region; planning in the one it names most");
                }
                (
                    inferred.region,
                    format!("inferred from the dump's {}", inferred.evidence),
                )
            }
            None => (
                DEFAULT_REGION.into(),
                "the default: nothing in the dump names a region".into(),
            ),
        }
    }

    /// Given offerings name their region in their zones: with neither `--region` nor a region
    /// in the dump, the catalog is that region's; when they disagree with the region chosen,
    /// a warning says so.
    fn region_of_offerings(&self, catalog: &mut Catalog, snapshot: Option<&Snapshot>) {
        let Some(offered) = zones_region(&catalog.all_zones()) else {
            return;
        };
        if offered == catalog.region {
            return;
        }
        let chosen =
            self.region.is_some() || snapshot.and_then(fleetwright_core::region::infer).is_some();
        if chosen {
            tracing::warn!(region = %catalog.region, offerings = %offered, "the offerings are of another region than the one planned in");
        } else {
            tracing::info!(region = %offered, source = "the zones of --offerings", "catalog region");
            catalog.region = offered;
        }
    }

    /// The catalog for the dump: embedded, or built from the given documents (all three).
    pub fn load(&self, snapshot: Option<&Snapshot>) -> anyhow::Result<Cow<'static, Catalog>> {
        let (region, why) = self.region(snapshot);
        tracing::info!(%region, source = %why, "catalog region");
        match (&self.instance_types, &self.offerings, &self.prices) {
            (None, None, None) => match Catalog::embedded_region(&region) {
                Some(catalog) => Ok(Cow::Borrowed(catalog)),
                None => bail!(
                    "region {region} ({why}) has no embedded catalog (embedded: {}). Plan it with \
                     its own catalog: --instance-types (the output of `aws ec2 \
                     describe-instance-types --region {region}`), --offerings (of `aws ec2 \
                     describe-instance-type-offerings --location-type availability-zone --region \
                     {region}`) and --prices (a CSV of instance_type,usd_per_hour); or pick an \
                     embedded region with --region",
                    EMBEDDED_REGIONS.join(", ")
                ),
            },
            (Some(t), Some(o), Some(p)) => {
                let read = |p: &PathBuf| {
                    std::fs::read(p).with_context(|| format!("reading {}", p.display()))
                };
                let mut catalog =
                    Catalog::from_documents(&region, &read(t)?, &read(o)?, &read(p)?)?;
                self.region_of_offerings(&mut catalog, snapshot);
                Ok(Cow::Owned(catalog))
            }
            _ => bail!(
                "--instance-types, --offerings and --prices go together: give all three or none"
            ),
        }
    }
}

/// The region most of these availability zones are in (a zone is its region and a letter).
fn zones_region(zones: &std::collections::BTreeSet<String>) -> Option<String> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for zone in zones {
        let region = zone.trim_end_matches(|c: char| c.is_ascii_lowercase());
        if region.len() < zone.len() && region.ends_with(|c: char| c.is_ascii_digit()) {
            *counts.entry(region).or_default() += 1;
        }
    }
    let most = counts.iter().max_by_key(|(_, n)| **n)?;
    Some(most.0.to_string())
}

#[cfg(test)]
#[path = "../tests/unit/catalog_args.rs"]
mod tests;
