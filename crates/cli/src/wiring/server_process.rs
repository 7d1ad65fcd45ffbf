//! The servers `goodput tune` starts: a command run by `sh -c` in a process group of its own
//! (its stdout and stderr in a log file), polled until a URL answers 2xx, watched while it is
//! measured, and stopped — SIGTERM to the whole group, SIGKILL after a grace period, then a
//! check that no process of the group survived. One HTTP request with a timeout
//! ([`request`]) serves the readiness poll and the reset hook.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::record::Exchange;
use http_body_util::Full;
use tokio_util::sync::CancellationToken;

/// Lines of a server's log kept with a failure.
pub(crate) const LOG_TAIL_LINES: usize = 20;
/// Longest line of a log tail kept, characters.
const LOG_LINE_CHARS: usize = 400;
/// How often readiness and the process are checked.
const POLL: Duration = Duration::from_millis(100);
/// How long one readiness request may take.
const READY_REQUEST: Duration = Duration::from_secs(5);
/// How long the group may take to vanish after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Why a server could not be used: where it failed and what happened.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerFailure {
    /// `start`, `ready`, `measure` or `stop`.
    pub(crate) stage: &'static str,
    /// What happened.
    pub(crate) reason: String,
}

/// A running server: the `sh -c` leader of its process group. Dropped without
/// [`Server::stop`] (an error or a panic on the way), its group gets SIGKILL.
#[derive(Debug)]
pub(crate) struct Server {
    child: Arc<Mutex<Child>>,
    pgid: i32,
    started: Instant,
    stopped: bool,
}

impl Drop for Server {
    fn drop(&mut self) {
        if !self.stopped {
            signal_group(self.pgid, Stop::Kill);
            let _ = self.exit_status();
        }
    }
}

/// A free TCP port on loopback (bound and released: the server binds it next).
pub(crate) fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

impl Server {
    /// Runs `command` with `sh -c` in a new process group, stdout and stderr appended to
    /// `log` (created).
    pub(crate) fn start(command: &str, log: &Path) -> Result<Server, ServerFailure> {
        let failure = |reason: String| ServerFailure {
            stage: "start",
            reason,
        };
        let file = File::create(log)
            .map_err(|e| failure(format!("cannot create {}: {e}", log.display())))?;
        let stderr = file
            .try_clone()
            .map_err(|e| failure(format!("cannot share {}: {e}", log.display())))?;
        let mut shell = Command::new("/bin/sh");
        shell
            .args(["-c", command])
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(stderr);
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut shell, 0);
        let child = shell
            .spawn()
            .map_err(|e| failure(format!("cannot run /bin/sh -c {command:?}: {e}")))?;
        let pgid = i32::try_from(child.id()).unwrap_or(i32::MAX);
        Ok(Server {
            child: Arc::new(Mutex::new(child)),
            pgid,
            started: Instant::now(),
            stopped: false,
        })
    }

    /// The process group (the shell's pid).
    pub(crate) fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The shell's exit, when it has exited.
    pub(crate) fn exit_status(&self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        child.try_wait().ok().flatten()
    }

    /// Waits until one of `urls` answers 2xx (the time since the start), the server exits, the
    /// timeout passes or `cancel` fires.
    pub(crate) async fn wait_ready(
        &self,
        urls: &[String],
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Duration, ServerFailure> {
        let failure = |reason: String| ServerFailure {
            stage: "ready",
            reason,
        };
        let mut last = String::from("nothing answered yet");
        while self.started.elapsed() < timeout {
            if let Some(status) = self.exit_status() {
                return Err(failure(format!("exited ({status}) before it was ready")));
            }
            if cancel.is_cancelled() {
                return Err(failure("interrupted while starting".into()));
            }
            for url in urls {
                match request(http::Method::GET, url, READY_REQUEST).await {
                    Ok(status) if (200..300).contains(&status) => {
                        return Ok(self.started.elapsed());
                    }
                    Ok(status) => last = format!("GET {url}: HTTP {status}"),
                    Err(error) => last = format!("GET {url}: {error}"),
                }
            }
            tokio::time::sleep(POLL).await;
        }
        Err(failure(format!(
            "not ready within {} s ({last})",
            timeout.as_secs_f64()
        )))
    }

    /// Cancels `token` when the server exits before [`Server::stop`] (a crash mid-step): the
    /// measurement then ends as if interrupted.
    pub(crate) fn watch(&self, token: CancellationToken) -> tokio::task::JoinHandle<()> {
        let child = Arc::clone(&self.child);
        tokio::spawn(async move {
            loop {
                let done = {
                    let mut child = child.lock().unwrap_or_else(PoisonError::into_inner);
                    child.try_wait().ok().flatten().is_some()
                };
                if done {
                    token.cancel();
                    return;
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }

    /// Stops the whole process group: SIGTERM, SIGKILL after `grace`; `Err` names the
    /// processes that survived SIGKILL.
    pub(crate) async fn stop(mut self, grace: Duration) -> Result<(), ServerFailure> {
        self.stopped = true;
        signal_group(self.pgid, Stop::Terminate);
        if self.wait_gone(grace).await {
            return Ok(());
        }
        signal_group(self.pgid, Stop::Kill);
        if self.wait_gone(KILL_WAIT).await {
            return Ok(());
        }
        let left: Vec<String> = survivors(self.pgid)
            .into_iter()
            .map(|(pid, name)| format!("{pid} ({name})"))
            .collect();
        Err(ServerFailure {
            stage: "stop",
            reason: format!(
                "processes of group {} survived SIGKILL: {}",
                self.pgid,
                left.join(", ")
            ),
        })
    }

    /// Reaps the shell and waits up to `limit` for the group to have no live process.
    async fn wait_gone(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let _ = self.exit_status();
            if survivors(self.pgid).is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The last `lines` lines of the file at `path` (each cut to a readable length).
pub(crate) fn log_tail(path: &Path, lines: usize) -> Vec<String> {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|line| line.chars().take(LOG_LINE_CHARS).collect())
        .collect()
}

/// A signal for a process group.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stop {
    /// SIGTERM.
    Terminate,
    /// SIGKILL.
    Kill,
}

/// Sends `stop` to every process of group `pgid` (one already gone is not an error).
pub(crate) fn signal_group(pgid: i32, stop: Stop) {
    #[cfg(unix)]
    {
        use nix::sys::signal::{Signal, killpg};
        let signal = match stop {
            Stop::Terminate => Signal::SIGTERM,
            Stop::Kill => Signal::SIGKILL,
        };
        let _ = killpg(nix::unistd::Pid::from_raw(pgid), signal);
    }
    #[cfg(not(unix))]
    let _ = (pgid, stop);
}

/// The live (not zombie) processes of group `pgid`, with their names, from `/proc`; where
/// there is no `/proc`, whether the group still takes signals.
pub(crate) fn survivors(pgid: i32) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return if group_alive(pgid) {
            vec![(pgid, "?".to_string())]
        } else {
            Vec::new()
        };
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid pgrp …`: comm may hold spaces and parentheses.
            let (head, rest) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_string();
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let (state, group) = (*fields.first()?, fields.get(2)?.parse::<i32>().ok()?);
            (group == pgid && state != "Z" && state != "X").then_some((pid, name))
        })
        .collect()
}

/// Whether any process of group `pgid` still takes signals.
fn group_alive(pgid: i32) -> bool {
    #[cfg(unix)]
    {
        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok()
    }
    #[cfg(not(unix))]
    {
        let _ = pgid;
        false
    }
}

/// One request with an empty body to `url` within `timeout`: its status.
pub(crate) async fn request(
    method: http::Method,
    url: &str,
    timeout: Duration,
) -> Result<u16, String> {
    let target = Target::parse(url).map_err(|e| e.to_string())?;
    let request = http::Request::builder()
        .method(method)
        .uri(target.exact())
        .header(http::header::CONTENT_LENGTH, "0")
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let client = HttpClient::tcp(target, HttpConfig::default());
    let exchange = async {
        let mut exchange = Exchange::default();
        let mut response = client
            .send(request, &mut exchange)
            .await
            .map_err(|failure| failure.message)?;
        let status = response.status().as_u16();
        // Read the answer to its end (a server may log a reset connection as an error).
        while let Some(frame) = response.body_mut().data().await {
            if frame.is_err() {
                break;
            }
        }
        Ok(status)
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| format!("no answer within {} s", timeout.as_secs_f64()))?
}

/// POSTs `url` (`goodput tune --reset-url`, a cache reset before a step); anything but a 2xx
/// answer is an error.
pub(crate) async fn reset(url: &str) -> anyhow::Result<()> {
    match request(http::Method::POST, url, Duration::from_secs(30)).await {
        Ok(status) if (200..300).contains(&status) => Ok(()),
        Ok(status) => anyhow::bail!("--reset-url: POST {url} answered HTTP {status}"),
        Err(error) => anyhow::bail!("--reset-url: POST {url}: {error}"),
    }
}

/// The URLs a server's readiness is polled at: `ready_url`, else the target's `/health` and
/// its `/v1/models`.
pub(crate) fn ready_urls(target: &str, ready_url: Option<String>) -> Vec<String> {
    if let Some(url) = ready_url {
        return vec![url];
    }
    match Target::parse(target) {
        Ok(parsed) => {
            let scheme = if parsed.is_https() { "https" } else { "http" };
            vec![
                format!("{scheme}://{}/health", parsed.authority()),
                parsed.url("models"),
            ]
        }
        Err(_) => vec![target.to_string()],
    }
}
