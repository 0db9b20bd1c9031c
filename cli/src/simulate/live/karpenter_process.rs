//! Karpenter's process in a run against a real cluster (`simulate --kubeconfig --karpenter`):
//! started under a shell watchdog that stops it when the run ends however it ends, with a bare
//! environment and its own copy of the run's kubeconfig (checked to reach the server the guard
//! checked, [`same_server`]), waited for until its health probe answers, and measured (CPU time
//! and peak memory from `/proc`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context};
use chrono::Utc;
use serde_json::Value;
use tracing::info;

use super::super::report::Usage;
use super::owned::Run;

/// How long Karpenter has to stop before it is killed.
const STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(20);
/// Linux's clock ticks a second, the unit of `/proc/PID/stat`'s CPU times.
const CLOCK_TICKS: f64 = 100.0;

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
        bin: &Path,
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
            .arg(bin)
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
            .with_context(|| format!("starting Karpenter ({})", bin.display()))?;
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
