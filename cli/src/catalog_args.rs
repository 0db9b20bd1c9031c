//! Catalog flags shared by verbs: the embedded us-east-1 catalog, or the three AWS documents.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use fleetwright_core::Catalog;

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
    /// Region the documents describe.
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
}

impl CatalogArgs {
    /// The embedded catalog, or one built from the given documents (all three are needed).
    pub fn load(&self) -> anyhow::Result<std::borrow::Cow<'static, Catalog>> {
        match (&self.instance_types, &self.offerings, &self.prices) {
            (None, None, None) => Ok(std::borrow::Cow::Borrowed(Catalog::embedded())),
            (Some(t), Some(o), Some(p)) => {
                let read = |p: &PathBuf| {
                    std::fs::read(p).with_context(|| format!("reading {}", p.display()))
                };
                let catalog =
                    Catalog::from_documents(&self.region, &read(t)?, &read(o)?, &read(p)?)?;
                Ok(std::borrow::Cow::Owned(catalog))
            }
            _ => bail!(
                "--instance-types, --offerings and --prices go together: give all three or none"
            ),
        }
    }
}
