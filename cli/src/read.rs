//! Reading the cluster a verb works on: a dump file, or the cluster of a kubeconfig read as
//! the tick reads it; and Karpenter's scheduler config document (`--scheduler-config`).

use anyhow::Context;
use fleetwright_core::default_spread::DefaultSpread;
use fleetwright_kube::dump::ClusterDump;

/// The cluster a verb reads, and its name for messages: through the kubeconfig's API server, or
/// from the dump file; None with neither. Its ignored keys and expanded workloads are reported
/// with the objects set aside, by [`crate::aside::readable_snapshot`].
pub fn read_input(
    kubeconfig: Option<&std::path::Path>,
    cluster: Option<&std::path::Path>,
    default_spread: &[DefaultSpread],
) -> anyhow::Result<Option<(ClusterDump, String)>> {
    let mut read = match (kubeconfig, cluster) {
        (Some(kubeconfig), _) => (
            read_cluster(kubeconfig, default_spread)?,
            format!("the cluster of {}", kubeconfig.display()),
        ),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let source = path.display().to_string();
            let blank = |l: &str| {
                let l = l.trim();
                l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
            };
            if text.lines().all(blank) {
                eprintln!("warning: {source}: no object in it (an empty file, or every document commented out)");
            }
            (fleetwright_kube::dump::parse(&text, &source)?, source)
        }
        (None, None) => return Ok(None),
    };
    read.0.default_spread = default_spread.to_vec();
    Ok(Some(read))
}

/// `--scheduler-config FILE`: the default topology spread of Karpenter's scheduler config
/// document (the tick's `FLEETWRIGHT_SCHEDULER_CONFIG`); none without the flag.
pub fn scheduler_config(path: Option<&std::path::Path>) -> anyhow::Result<Vec<DefaultSpread>> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    fleetwright_kube::scheduler_config::parse(&text)
        .with_context(|| format!("--scheduler-config {}", path.display()))
}

/// The cluster as the tick reads it, through the kubeconfig's API server: every list it makes
/// (pods slim and converted page by page, the CA bundle for EC2NodeClass hashes from
/// `kube-root-ca.crt`), and nothing written.
pub fn read_cluster(
    kubeconfig: &std::path::Path,
    default_spread: &[DefaultSpread],
) -> anyhow::Result<ClusterDump> {
    let defaults = default_spread.to_vec();
    with_client(kubeconfig, |client| async move {
        let reader = fleetwright_kube::snapshot::SnapshotReader::new(client)
            .with_ca_bundle(None, "karpenter")
            .with_default_spread(defaults);
        reader
            .read_dump()
            .await
            .with_context(|| format!("reading the cluster of {}", kubeconfig.display()))
    })
}

/// Runs `work` with a client for the kubeconfig's API server, on a runtime of its own.
pub fn with_client<T, F, Fut>(kubeconfig: &std::path::Path, work: F) -> anyhow::Result<T>
where
    F: FnOnce(kube::Client) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = fleetwright_kube::client::kubeconfig_client(kubeconfig)
            .await
            .with_context(|| format!("--kubeconfig {}", kubeconfig.display()))?;
        work(client).await
    })
}
