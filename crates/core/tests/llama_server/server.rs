//! llama.cpp's `llama-server` as a test fixture: finds the binary and models that
//! `scripts/llama-server.sh env` announces, starts the server on a port it picks itself
//! (`--port 0`), waits for `/health`, and kills it when the guard drops. Servers run one at a
//! time (they share two cores), so timings measured in one test are not disturbed by another.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The generated test models (random weights, llama-spm tokenizer, ChatML template).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// 64 wide × 2 layers: fast, for functional checks.
    Tiny,
    /// 512 wide × 8 layers: prefill time visibly grows with prompt length.
    Small,
}

impl Model {
    fn variable(self) -> &'static str {
        match self {
            Model::Tiny => "GOODPUT_LLAMA_MODEL_TINY",
            Model::Small => "GOODPUT_LLAMA_MODEL_SMALL",
        }
    }
}

const HOW_TO: &str = "these tests run against a real llama-server: run `.ci/run`, or \
     `eval \"$(scripts/llama-server.sh env)\"` and then \
     `cargo test -p goodput-core --features llama-server --test llama_server`";

/// A path named by an environment variable that must exist.
fn required_path(variable: &str) -> PathBuf {
    let Some(value) = std::env::var_os(variable) else {
        panic!("{variable} is not set; {HOW_TO}");
    };
    let path = PathBuf::from(value);
    assert!(
        path.exists(),
        "{variable}={} does not exist; {HOW_TO}",
        path.display()
    );
    path
}

/// One server at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// How to start a server.
#[derive(Debug, Clone)]
pub struct Options {
    /// Which model to serve.
    pub model: Model,
    /// Parallel slots (`-np`).
    pub slots: u32,
    /// Further flags.
    pub extra: Vec<String>,
}

impl Options {
    /// `model` on `slots` slots.
    pub fn new(model: Model, slots: u32) -> Self {
        Options {
            model,
            slots,
            extra: Vec::new(),
        }
    }
}

/// A running `llama-server`; killed on drop.
#[derive(Debug)]
pub struct LlamaServer {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
    /// Held while any server of a test runs (a fleet's servers share it).
    _serial: Rc<MutexGuard<'static, ()>>,
}

const START_TIMEOUT: Duration = Duration::from_secs(120);

impl LlamaServer {
    /// Starts a server with `options` and waits until `/health` answers 200.
    pub fn start(options: &Options) -> Self {
        let serial = Rc::new(SERIAL.lock().unwrap_or_else(PoisonError::into_inner));
        Self::start_holding(options, serial)
    }

    /// Starts one server per entry of `fleet`, all running at once (one test's fleet).
    pub fn start_fleet(fleet: &[Options]) -> Vec<Self> {
        let serial = Rc::new(SERIAL.lock().unwrap_or_else(PoisonError::into_inner));
        fleet
            .iter()
            .map(|options| Self::start_holding(options, Rc::clone(&serial)))
            .collect()
    }

    fn start_holding(options: &Options, serial: Rc<MutexGuard<'static, ()>>) -> Self {
        let binary = required_path("GOODPUT_LLAMA_SERVER");
        let model = required_path(options.model.variable());
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("llama-server.log");
        let out = File::create(&log).unwrap();
        let child = Command::new(&binary)
            .args(["-m".as_ref(), model.as_os_str()])
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "-c",
                "8192",
                "-t",
                "2",
            ])
            .args(["-np", &options.slots.to_string(), "--metrics"])
            .args(&options.extra)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let mut server = LlamaServer {
            child,
            port: 0,
            log,
            _dir: dir,
            _serial: serial,
        };
        server.port = server.wait_for_port();
        server.wait_for_health();
        server
    }

    /// The OpenAI API root, `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// `host:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn fail(&mut self, what: &str) -> ! {
        let _ = self.child.kill();
        let log = self.log();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!("llama-server {what}; its log ends:\n{}", tail.join("\n"));
    }

    fn check_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            self.fail(&format!("exited early ({status})"));
        }
    }

    /// The port from the server's `listening on http://127.0.0.1:PORT` line.
    fn wait_for_port(&mut self) -> u16 {
        let started = Instant::now();
        let marker = "listening on http://127.0.0.1:";
        loop {
            let log = self.log();
            if let Some(at) = log.find(marker) {
                let digits: String = log[at + marker.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if let Ok(port) = digits.parse() {
                    return port;
                }
            }
            self.check_alive();
            if started.elapsed() > START_TIMEOUT {
                self.fail("did not report its port");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_for_health(&mut self) {
        let started = Instant::now();
        while get(&self.address(), "/health").map(|(status, _)| status) != Some(200) {
            self.check_alive();
            if started.elapsed() > START_TIMEOUT {
                self.fail("never answered /health with 200");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `GET path` on the server: status and body.
    pub fn get(&self, path: &str) -> (u16, String) {
        get(&self.address(), path).unwrap_or_else(|| panic!("GET {path} failed"))
    }

    /// `POST path` with a JSON `body` on the server (a raw request, independent of goodput's
    /// client): status and body.
    pub fn post(&self, path: &str, body: &str) -> (u16, String) {
        let address = self.address();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        exchange(&address, &request).unwrap_or_else(|| panic!("POST {path} failed"))
    }

    /// The value of the unlabelled `llamacpp:<name>` sample of `/metrics` (read here to check
    /// goodput's counts against the server's own; goodput's scraper is tested elsewhere).
    pub fn metric(&self, name: &str) -> f64 {
        let (status, body) = self.get("/metrics");
        assert_eq!(status, 200, "/metrics: {body}");
        let prefix = format!("llamacpp:{name} ");
        body.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no llamacpp:{name} in /metrics:\n{body}"))
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A one-shot `GET` over a fresh connection (`Connection: close`).
fn get(address: &str, path: &str) -> Option<(u16, String)> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    exchange(address, &request)
}

/// Sends `request` over a fresh connection and reads the whole response: status and body.
fn exchange(address: &str, request: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_string();
    Some((status, body))
}
