//! Karpenter itself as the node autoscaler of a run against a real cluster
//! (`simulate --kubeconfig --autoscaler karpenter`): Karpenter's whole controller over kwok
//! nodes, from its KWOK cloud provider (built from Karpenter's Go module by
//! `scripts/peer-e2e.sh`), fed Fleetwright's catalog as its instance types. The scenario, the
//! cluster's controllers, kube-scheduler and kwok are the same as in a Fleetwright run; this
//! module owns what differs:
//! - Karpenter's own CRDs, installed from its module, and its process (started once the
//!   scenario's objects exist, stopped before the clean-up), with its CPU time and peak memory;
//! - the scenario's node classes, written as KWOKNodeClasses whose registration delay is the
//!   simulated kubelets' [`JOIN_AFTER`], so nodes take as long to join under both autoscalers;
//! - the fleet, read back from the Nodes Karpenter made and priced from the same catalog, and
//!   the disruptions, from the events Karpenter records.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context};
use chrono::Utc;
use fleetwright_cloud::Instance;
use fleetwright_core::labels::{CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, ZONE};
use fleetwright_core::InstanceType;
use fleetwright_crds::NodeClaim;
use fleetwright_sim::SimInstance;
use k8s_openapi::api::core::v1::{Event, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::super::report::{AutoscalerUsage, InterruptionOutcome, Invocations, Usage};
use super::super::scenario::Action;
use super::owned::{self, Run};
use super::{Live, JOIN_AFTER};

/// Karpenter's node class kind in its KWOK provider.
const KWOK_GROUP: &str = "karpenter.kwok.sh";
const KWOK_CLASS: &str = "KWOKNodeClass";
/// The label Karpenter's KWOK provider puts the offering's price in.
const PRICE_LABEL: &str = "eks-node-viewer/instance-price";
/// How long Karpenter has to stop before it is killed.
const STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(20);
/// Linux's clock ticks a second, the unit of `/proc/PID/stat`'s CPU times.
const CLOCK_TICKS: f64 = 100.0;

/// What to run as Karpenter: its KWOK controller and the directories of its CRDs.
#[derive(Clone, Debug)]
pub struct Karpenter {
    pub bin: PathBuf,
    pub crds: Vec<PathBuf>,
}

/// The scenario object as it is written for Karpenter's KWOK provider: an EC2NodeClass becomes
/// a KWOKNodeClass of the same name, and a NodePool refers to it; everything else is unchanged.
pub fn translate(object: &Value) -> Value {
    match object["kind"].as_str() {
        Some("EC2NodeClass") => json!({
            "apiVersion": format!("{KWOK_GROUP}/v1alpha1"),
            "kind": KWOK_CLASS,
            "metadata": {
                "name": object["metadata"]["name"],
                "labels": object["metadata"]["labels"].as_object().cloned().unwrap_or_default(),
            },
            "spec": {"nodeRegistrationDelay": format!("{}s", JOIN_AFTER.num_seconds())},
        }),
        Some("NodePool") => {
            let mut pool = object.clone();
            let reference = &mut pool["spec"]["template"]["spec"]["nodeClassRef"];
            let name = reference["name"].clone();
            *reference = json!({"group": KWOK_GROUP, "kind": KWOK_CLASS, "name": name});
            pool
        }
        _ => object.clone(),
    }
}

/// Creates the CRDs in `dirs` (every `*.yaml`) that the cluster lacks, labelled as this run's;
/// returns the names of all of them, to wait for.
pub async fn install_crds(
    admin: &Client,
    run: &Run,
    dirs: &[PathBuf],
) -> anyhow::Result<Vec<String>> {
    let api: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let mut names = Vec::new();
    for dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("--karpenter-crds {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let mut crd: CustomResourceDefinition = serde_yaml::from_str(&text)
                .with_context(|| format!("{}: not a CustomResourceDefinition", file.display()))?;
            let name = crd.metadata.name.clone().unwrap_or_default();
            names.push(name.clone());
            if api.get_opt(&name).await?.is_some() {
                continue;
            }
            crd.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(owned::RUN_LABEL.into(), run.id().into());
            api.create(&PostParams::default(), &crd)
                .await
                .with_context(|| format!("installing Karpenter's CRD {name}"))?;
            info!(target: "simulate::karpenter", crd = %name, "Karpenter's CustomResourceDefinition installed");
        }
    }
    Ok(names)
}

/// Starts Karpenter (`$1`, its pid written to `$2`) and stays until its standard input closes,
/// then kills it. The run holds the other end of that pipe, and the kernel closes it however the
/// run ends (a signal, a crash), so Karpenter never goes on reconciling a cluster on its own.
const WATCHDOG: &str = r#""$1" </dev/null & echo $! >"$2"; read -r _; kill "$!" 2>/dev/null; wait"#;

/// Karpenter's running process, under its watchdog.
pub struct Process {
    watchdog: Child,
    pid: u32,
    health: u16,
    pub log: PathBuf,
}

impl Process {
    /// Starts Karpenter against `kubeconfig`, its instance types from `types` (written beside
    /// its log in a directory of this run).
    pub async fn start(
        karpenter: &Karpenter,
        kubeconfig: &Path,
        types: &Value,
        run: &Run,
    ) -> anyhow::Result<Process> {
        let dir = std::env::temp_dir().join(format!("fleetwright-karpenter-{}", run.id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let types_file = dir.join("instance-types.json");
        std::fs::write(&types_file, serde_json::to_vec(types)?)
            .with_context(|| format!("writing {}", types_file.display()))?;
        // Karpenter reads one file of the run's, checked again here: a KUBECONFIG list
        // (`a:b`), or a file changed since the run's start, cannot point it elsewhere.
        let pinned = dir.join("karpenter.kubeconfig");
        std::fs::copy(kubeconfig, &pinned)
            .with_context(|| format!("copying {} for Karpenter", kubeconfig.display()))?;
        same_server(kubeconfig, &pinned).await?;
        let kubeconfig = pinned.as_path();
        let log = dir.join("karpenter.log");
        let pid_file = dir.join("karpenter.pid");
        let _ = std::fs::remove_file(&pid_file);
        let out = std::fs::File::create(&log)?;
        let health = free_port()?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(WATCHDOG)
            .arg("sh")
            .arg(&karpenter.bin)
            .arg(&pid_file);
        // Only what Karpenter needs: no cloud credentials or other settings of the caller's.
        command.env_clear();
        for kept in ["PATH", "HOME", "TMPDIR"] {
            if let Some(value) = std::env::var_os(kept) {
                command.env(kept, value);
            }
        }
        let watchdog = command
            .env("KUBECONFIG", kubeconfig)
            .env("INSTANCE_TYPES_FILE_PATH", &types_file)
            .env("SYSTEM_NAMESPACE", "default")
            .env("DISABLE_LEADER_ELECTION", "true")
            .env("METRICS_PORT", free_port()?.to_string())
            .env("HEALTH_PROBE_PORT", health.to_string())
            .env("LOG_LEVEL", "info")
            .stdin(Stdio::piped())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting Karpenter ({})", karpenter.bin.display()))?;
        let mut process = Process {
            watchdog,
            pid: 0,
            health,
            log,
        };
        process.pid = read_pid(&pid_file).await?;
        info!(target: "simulate::karpenter", pid = process.pid, log = %process.log.display(), "Karpenter started");
        Ok(process)
    }

    /// Whether Karpenter's process is still running (a zombie the watchdog has not reaped yet
    /// has ended).
    fn alive(&self) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next());
        state.is_some_and(|s| !matches!(s, "Z" | "X"))
    }

    /// Whether Karpenter is still the watchdog's child (its pid not taken by another process).
    fn ours(&self) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1));
        parent.and_then(|p| p.parse::<u32>().ok()) == Some(self.watchdog.id())
    }

    /// Waits until Karpenter's health probe answers, so the run starts with it running.
    pub async fn ready(&mut self) -> anyhow::Result<()> {
        let deadline = Utc::now() + chrono::Duration::seconds(90);
        loop {
            if !self.alive() {
                bail!(
                    "Karpenter exited at start; its log is {}",
                    self.log.display()
                );
            }
            if healthy(self.health).await {
                return Ok(());
            }
            if Utc::now() > deadline {
                bail!(
                    "Karpenter is not healthy after 90 s; its log is {}",
                    self.log.display()
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    /// Its CPU time and peak resident memory so far.
    pub fn usage(&self) -> Usage {
        let pid = self.pid;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The fields after the command name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let peak_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        Usage {
            // utime and stime are the 14th and 15th fields; 12th and 13th after the name.
            cpu_seconds: (ticks(11) + ticks(12)) / CLOCK_TICKS,
            peak_rss_mib: peak_kib / 1024.0,
        }
    }

    /// Stops Karpenter and returns what it used.
    pub fn stop(mut self) -> Usage {
        let usage = self.usage();
        self.end();
        info!(target: "simulate::karpenter", cpu_seconds = usage.cpu_seconds, peak_rss_mib = usage.peak_rss_mib, "Karpenter stopped");
        usage
    }

    /// Closes the watchdog's pipe (it then stops Karpenter) and waits for it; a Karpenter that
    /// has not stopped after [`STOP_WITHIN`] is killed.
    fn end(&mut self) {
        drop(self.watchdog.stdin.take());
        let deadline = std::time::Instant::now() + STOP_WITHIN;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.watchdog.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if self.ours() {
            let _ = Command::new("kill")
                .args(["-KILL", &self.pid.to_string()])
                .status();
        }
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.end();
    }
}

/// The pid the watchdog wrote, once it has.
async fn read_pid(file: &Path) -> anyhow::Result<u32> {
    for _ in 0..100 {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return Ok(pid);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    bail!("Karpenter's watchdog wrote no pid to {}", file.display())
}

/// Refuses a run whose `--controller-kubeconfig` reaches another API server than
/// `--kubeconfig`: the guard checked only that one, and the autoscaler (Fleetwright's tick, or
/// Karpenter) must act on nothing else. Both files' current contexts must name the same server
/// URL and the same CA.
pub async fn same_server(checked: &Path, controller: &Path) -> anyhow::Result<()> {
    let server = |path: PathBuf| async move {
        let kubeconfig = kube::config::Kubeconfig::read_from(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .with_context(|| format!("{}: its current context", path.display()))?;
        anyhow::Ok((config.cluster_url.to_string(), config.root_cert))
    };
    let ours = server(checked.to_path_buf()).await?;
    let theirs = server(controller.to_path_buf()).await?;
    anyhow::ensure!(
        ours == theirs,
        "--controller-kubeconfig {} reaches another API server ({}) than --kubeconfig {} ({}), or trusts another CA: the autoscaler would act on a cluster the run did not check",
        controller.display(),
        theirs.0,
        checked.display(),
        ours.0
    );
    Ok(())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Whether `GET /readyz` on the health port answers 200 (a blocking probe, off the runtime's
/// thread).
async fn healthy(port: u16) -> bool {
    tokio::task::spawn_blocking(move || probe(port))
        .await
        .unwrap_or(false)
}

fn probe(port: u16) -> bool {
    use std::io::{Read, Write};
    let timeout = std::time::Duration::from_secs(2);
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&address, timeout) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(timeout));
    if stream
        .write_all(b"GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200")
}

/// The run's Nodes that Karpenter made, as the instances they stand for (id: the Node's name),
/// priced from `types` (the offering of the Node's zone and capacity type), else from the price
/// label Karpenter's provider writes.
pub fn fleet(
    nodes: &[Node],
    types: &BTreeMap<String, InstanceType>,
) -> BTreeMap<String, SimInstance> {
    nodes
        .iter()
        .filter_map(|node| {
            let labels = node.metadata.labels.as_ref()?;
            let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
            let name = node.metadata.name.clone()?;
            let (instance_type, zone, capacity) =
                (label(INSTANCE_TYPE), label(ZONE), label(CAPACITY_TYPE));
            let price = types
                .get(&instance_type)
                .and_then(|t| {
                    t.offerings
                        .iter()
                        .find(|o| o.zone == zone && o.capacity_type == capacity)
                })
                .map(|o| o.price)
                .or_else(|| label(PRICE_LABEL).parse().ok())
                .unwrap_or(0.0);
            let instance = Instance {
                id: name.clone(),
                instance_type,
                zone,
                state: "running".into(),
                capacity_type: capacity,
                image_id: String::new(),
                subnet_id: String::new(),
                security_groups: Vec::new(),
                launch_time: None,
                tags: BTreeMap::from([(NODEPOOL.to_string(), label(NODEPOOL))]),
                capacity_reservation_id: None,
                partition: None,
            };
            Some((
                name,
                SimInstance {
                    instance,
                    price,
                    warned: None,
                },
            ))
        })
        .collect()
}

/// The nodes Karpenter began to disrupt, from its `DisruptionTerminating` events on Nodes:
/// `Reason/delete:node`, each node once.
pub async fn disruptions(admin: &Client) -> anyhow::Result<Vec<String>> {
    let events: Api<Event> = Api::all(admin.clone());
    let params =
        ListParams::default().fields("reason=DisruptionTerminating,involvedObject.kind=Node");
    let mut found = Vec::new();
    for event in events.list(&params).await?.items {
        let reason = event
            .message
            .as_deref()
            .and_then(|m| m.strip_prefix("Disrupting Node: "))
            .unwrap_or("Unknown");
        let node = event.involved_object.name.unwrap_or_default();
        found.push(format!("{reason}/delete:{node}"));
    }
    Ok(found)
}

/// Whether Karpenter's run can play `action`: its KWOK provider has no AMIs, no capacity errors
/// and no node conditions to fail.
pub fn plays(action: &Action) -> bool {
    matches!(
        action,
        Action::Scale(_) | Action::Delete(_) | Action::Apply(_) | Action::Interrupt(_)
    )
}

impl Live {
    /// Installs Karpenter's CRDs (in place of Fleetwright's) before the scenario's objects;
    /// returns their names.
    pub(super) async fn install_karpenter_crds(&self) -> anyhow::Result<Vec<String>> {
        match &self.karpenter {
            Some(karpenter) => install_crds(&self.admin, &self.run, &karpenter.crds).await,
            None => Ok(Vec::new()),
        }
    }

    /// Starts Karpenter once the scenario's objects exist, and waits until it is healthy.
    pub(super) async fn start_karpenter(&mut self) -> anyhow::Result<()> {
        let Some(karpenter) = &self.karpenter else {
            return Ok(());
        };
        let types: Vec<InstanceType> = self.types.values().cloned().collect();
        let file = crate::peer::kwok::instance_types(&types)?;
        let mut process =
            Process::start(karpenter, &self.controller_kubeconfig, &file, &self.run).await?;
        let ready = process.ready().await;
        self.process = Some(process);
        ready
    }

    /// Stops Karpenter, if it runs, and returns what it used.
    pub(super) fn stop_karpenter(&mut self) -> Option<Usage> {
        let process = self.process.take()?;
        let log = process.log.clone();
        let usage = process.stop();
        info!(target: "simulate::karpenter", log = %log.display(), "Karpenter's log");
        Some(usage)
    }

    /// What the autoscaler used: Karpenter's process, or Fleetwright's invocations.
    pub(super) fn autoscaler_usage(&self, karpenter: Option<Usage>) -> AutoscalerUsage {
        match (&self.karpenter, karpenter) {
            (Some(_), usage) => AutoscalerUsage {
                name: "karpenter".into(),
                karpenter: usage,
                invocations: BTreeMap::new(),
            },
            (None, _) => AutoscalerUsage {
                name: "fleetwright".into(),
                karpenter: None,
                invocations: self
                    .invocations
                    .iter()
                    .map(|(f, (count, seconds))| {
                        let invocations = Invocations {
                            count: *count,
                            seconds: *seconds,
                        };
                        (f.to_string(), invocations)
                    })
                    .collect(),
            },
        }
    }

    /// Each second of a Karpenter run: the disruptions it began, every few seconds.
    pub(super) async fn karpenter_round(&mut self, t: i64) {
        if t % 5 != 0 {
            return;
        }
        match disruptions(&self.admin).await {
            Ok(found) => self.watch.note_disruptions(found, t),
            Err(e) => {
                warn!(target: "simulate::karpenter", error = %e, "listing Karpenter's disruption events failed")
            }
        }
    }

    /// The fleet Karpenter runs: this run's Nodes, priced.
    pub(super) async fn karpenter_fleet(&mut self) -> BTreeMap<String, SimInstance> {
        let api: Api<Node> = Api::all(self.admin.clone());
        let params = ListParams::default().labels(&self.run.selector());
        let nodes = match api.list(&params).await {
            Ok(list) => list.items,
            Err(e) => {
                warn!(target: "simulate::karpenter", error = %e, "listing the nodes failed; the fleet is as it was");
                return self.last_fleet.clone();
            }
        };
        let nodes: Vec<Node> = nodes.into_iter().filter(|n| self.run.owns(n)).collect();
        self.nodes = nodes
            .iter()
            .filter_map(|n| {
                let name = n.metadata.name.clone()?;
                let provider = n.spec.as_ref()?.provider_id.clone().unwrap_or_default();
                Some((name, provider))
            })
            .collect();
        self.last_fleet = fleet(&nodes, &self.types);
        self.last_fleet.clone()
    }

    /// A spot interruption under Karpenter: what its interruption controller does with the
    /// warning, deleting the NodeClaim of a spot node of the pool that holds workload pods
    /// (chosen as the simulated cloud chooses), so that the node is drained and replaced.
    pub(super) async fn interrupt_karpenter(&mut self, nodepool: &str, count: usize, t: i64) {
        let pods = self.pods().await;
        let mut busy: BTreeMap<String, usize> = BTreeMap::new();
        for pod in pods.iter().filter(|p| super::workload(p)) {
            if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                *busy.entry(node).or_default() += 1;
            }
        }
        let fleet = self.karpenter_fleet().await;
        let mut spot: Vec<&SimInstance> = fleet
            .values()
            .filter(|i| i.nodepool() == nodepool && i.instance.capacity_type == "spot")
            .collect();
        // Busy nodes first, as the simulated cloud warns them first.
        spot.sort_by_key(|i| (!busy.contains_key(&i.instance.id), i.instance.id.clone()));
        let busy_count = spot
            .iter()
            .filter(|i| busy.contains_key(&i.instance.id))
            .count();
        let mut chosen = Vec::new();
        while chosen.len() < count && !spot.is_empty() {
            let pool = if busy_count > chosen.len() {
                busy_count - chosen.len()
            } else {
                spot.len()
            };
            let pick = self.rng.below(pool.min(spot.len()));
            chosen.push(spot.remove(pick).clone());
        }
        if chosen.is_empty() {
            warn!(target: "simulate::cloud", %nodepool, "no spot node of the nodepool to interrupt");
        }
        let claims: Api<NodeClaim> = Api::all(self.admin.clone());
        for instance in chosen {
            let node = instance.instance.id.clone();
            let claim = self.claim_of(&node).await;
            self.watch.interruptions.push(InterruptionOutcome {
                at: t,
                instance_id: node.clone(),
                instance_type: instance.instance.instance_type.clone(),
                pods_displaced: busy.get(&node).copied().unwrap_or(0),
                node: Some(node.clone()),
                nodepool: nodepool.to_string(),
                ..Default::default()
            });
            let Some(claim) = claim else {
                warn!(target: "simulate::karpenter", %node, "no NodeClaim of this run for the interrupted node");
                continue;
            };
            info!(target: "simulate::cloud", %node, nodeclaim = %claim, "spot interruption warning; Karpenter's interruption controller deletes the NodeClaim");
            let deleted =
                owned::delete(&claims, &self.run, "NodeClaim", &claim, &Default::default()).await;
            if let Err(e) = deleted {
                warn!(target: "simulate::karpenter", %claim, error = %format!("{e:#}"), "deleting the interrupted NodeClaim failed");
            }
        }
    }

    /// The name of this run's NodeClaim whose Node is `node`.
    async fn claim_of(&self, node: &str) -> Option<String> {
        let claims: Api<NodeClaim> = Api::all(self.admin.clone());
        let params = ListParams::default().labels(&self.run.selector());
        let list = claims.list(&params).await.ok()?;
        list.items
            .into_iter()
            .filter(|c| self.run.owns(c))
            .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .and_then(|c| c.metadata.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_class_becomes_a_kwok_node_class_that_joins_as_late_as_the_simulated_kubelets() {
        let class = json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "bottlerocket", "labels": {"a": "b"}}, "spec": {"amiFamily": "Bottlerocket"}});
        let kwok = translate(&class);
        assert_eq!(kwok["kind"], KWOK_CLASS);
        assert_eq!(kwok["metadata"]["name"], "bottlerocket");
        assert_eq!(kwok["metadata"]["labels"]["a"], "b");
        assert_eq!(
            kwok["spec"]["nodeRegistrationDelay"],
            format!("{}s", JOIN_AFTER.num_seconds())
        );
        let pool = json!({"kind": "NodePool", "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "bottlerocket"},
            "requirements": []}}}});
        let reference = &translate(&pool)["spec"]["template"]["spec"]["nodeClassRef"];
        assert_eq!(
            *reference,
            json!({"group": KWOK_GROUP, "kind": KWOK_CLASS, "name": "bottlerocket"})
        );
        let deployment = json!({"kind": "Deployment", "metadata": {"name": "x"}});
        assert_eq!(translate(&deployment), deployment);
    }
}
