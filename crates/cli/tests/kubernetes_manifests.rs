//! The Kubernetes manifests of `deploy/kubernetes/` are valid against the Kubernetes schemas
//! (strictly: no unknown field), checked offline by the PyPI package `kubernetes-validate`,
//! installed once into a virtualenv under `~/.cache/goodput/kubernetes-validate`
//! (`GOODPUT_KUBERNETES_VALIDATE` overrides the place). The test skips, loudly, only when the
//! package index cannot be reached to install it; and the shard Job's N agrees with itself
//! (`completions` = `parallelism` = `--shards`) and passes only flags `goodput run` knows.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::{goodput, ok};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

fn venv() -> PathBuf {
    if let Some(dir) = std::env::var_os("GOODPUT_KUBERNETES_VALIDATE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache/goodput/kubernetes-validate")
}

/// Signs in pip's output that the package index could not be reached.
const UNREACHABLE: [&str; 7] = [
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectTimeoutError",
    "ProxyError",
    "(from versions: none)",
];

/// The `kubernetes-validate` command, installed if needed; `None` when the index is out of
/// reach.
fn validator() -> Option<PathBuf> {
    let venv = venv();
    let command = venv.join("bin/kubernetes-validate");
    if command.exists() {
        return Some(command);
    }
    let created = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(
        created.success(),
        "python3 -m venv {} failed",
        venv.display()
    );
    let install = Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "-q",
            "--disable-pip-version-check",
            "--retries",
            "1",
        ])
        .args(["--timeout", "20", "kubernetes-validate>=1.30,<2"])
        .output()
        .unwrap();
    if install.status.success() {
        return Some(command);
    }
    let said = String::from_utf8_lossy(&install.stderr).to_string();
    if UNREACHABLE.iter().any(|sign| said.contains(sign)) {
        eprintln!(
            "\n{bar}\nSKIPPED: the Kubernetes manifests were NOT validated: the package index \
             could not be reached to install kubernetes-validate.\n{said}\n{bar}\n",
            bar = "!".repeat(78)
        );
        return None;
    }
    panic!("installing kubernetes-validate failed:\n{said}");
}

fn validate(command: &Path, files: &[PathBuf]) -> std::process::Output {
    Command::new(command)
        .args(["--strict", "--quiet"])
        .args(files)
        .output()
        .unwrap()
}

fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// A YAML file as JSON, read by the virtualenv's PyYAML (a dependency of the validator).
fn load_yaml(path: &Path) -> Value {
    let python = venv().join("bin/python");
    let output = ok(Command::new(python)
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        ])
        .arg(path)
        .output()
        .unwrap());
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn the_manifests_are_valid_kubernetes_and_agree_with_goodput() {
    let Some(command) = validator() else { return };
    let files = manifests();
    assert!(files.len() >= 3, "{files:?}");
    let output = validate(&command, &files);
    assert!(
        output.status.success(),
        "invalid manifests:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    // The check can fail: a mistyped field is refused.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    let text = std::fs::read_to_string(deploy_dir().join("shards-job.yaml")).unwrap();
    std::fs::write(&broken, text.replace("parallelism:", "paralelism:")).unwrap();
    assert!(!validate(&command, &[broken]).status.success());

    let job = load_yaml(&deploy_dir().join("shards-job.yaml"));
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["parallelism"], spec["completions"]);
    let container = &spec["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let shards = format!("--shards={}", spec["completions"]);
    assert!(args.contains(&shards.as_str()), "{args:?}");
    assert_eq!(args[0], "run");
    let help = goodput().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in args.iter().filter(|a| a.starts_with("--")) {
        let name = flag.split('=').next().unwrap();
        assert!(
            help.contains(&format!("{name} ")) || help.contains(&format!("{name}\n")),
            "goodput run has no {name}"
        );
    }
}
