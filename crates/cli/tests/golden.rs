//! Golden outputs on fixed seeds: what the virtual-time commands write — a run's report and
//! journal, a sweep's and a capacity search's reports, `plan --simulate`, `sim --explain`, and
//! the reports `goodput report` rebuilds from the run's and the sweep's journals —
//! must stay byte for byte what `tests/golden/digests.txt` records, once the few fields that
//! name the moment or the machine are taken out (when the run started, its command line, the
//! build's commit, the wall-clock `date` header and the per-run request ids). A redesign that
//! should change nothing proves it here; a change that should move a figure re-blesses the
//! digests on purpose: `GOODPUT_BLESS=1 cargo test -p goodput --test golden`, and says why in
//! its commit. Each digest is FNV-1a 64 of the normalised bytes (stable across Rust releases,
//! unlike `DefaultHasher`); on a mismatch the normalised output is written next to the test's
//! temporary directory's path, which the failure names, for a diff against a blessed build.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{goodput, ok};

/// The digests file, relative to this crate.
const DIGESTS: &str = "tests/golden/digests.txt";

/// Keys whose values name the moment, the machine or the run rather than what was measured.
const VOLATILE_KEYS: [&str; 8] = [
    "started_at",
    "client_host",
    "command_line",
    "git_sha",
    "headers",
    "request_id",
    "server_request_id",
    "response_id",
];

/// `value` without the volatile keys, at any depth.
fn without_volatile(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for key in VOLATILE_KEYS {
                map.remove(key);
            }
            map.values_mut().for_each(without_volatile);
        }
        Value::Array(items) => items.iter_mut().for_each(without_volatile),
        _ => {}
    }
}

/// A JSON document (or JSON lines) normalised: volatile keys removed, re-serialised compactly,
/// one document a line.
fn normalised_json(text: &str) -> String {
    let mut out = String::new();
    for document in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        let mut value = document.unwrap();
        without_volatile(&mut value);
        out.push_str(&serde_json::to_string(&value).unwrap());
        out.push('\n');
    }
    out
}

/// summary.md without its "started …" and build line.
fn normalised_markdown(text: &str) -> String {
    text.lines()
        .map(|line| match line.find(" · started ") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What one command wrote: (name, normalised bytes).
type Outputs = Vec<(String, String)>;

/// Runs `goodput args…` with `--out dir/name` and normalises the files it wrote.
fn written(dir: &Path, name: &str, args: &[&str], files: &[&str]) -> Outputs {
    let out = dir.join(name);
    ok(goodput()
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap());
    files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(out.join(file)).unwrap();
            let normal = if file.ends_with(".md") {
                normalised_markdown(&text)
            } else if file.ends_with(".csv") {
                text
            } else {
                normalised_json(&text)
            };
            (format!("{name}/{file}"), normal)
        })
        .collect()
}

/// Runs `goodput args…` and takes its standard output (JSON normalised, text as is).
fn printed(name: &str, args: &[&str], json: bool) -> Outputs {
    let output = ok(goodput().args(args).output().unwrap());
    let text = String::from_utf8(output.stdout).unwrap();
    let normal = if json { normalised_json(&text) } else { text };
    vec![(name.to_string(), normal)]
}

/// Every golden output, in a fixed order.
fn outputs(dir: &Path) -> Outputs {
    let load = ["--input-tokens", "512", "--output-tokens", "32"];
    let slo = ["--slo", "ttft=500ms,tpot=50ms"];
    let mut all = Outputs::new();
    let run = [
        &["run", "--virtual-time", "--seed", "7", "--rate", "5"][..],
        &load,
    ]
    .concat()
    .into_iter()
    .chain(["--requests", "40"])
    .collect::<Vec<_>>();
    let files = ["report.json", "requests.jsonl", "summary.csv", "summary.md"];
    all.extend(written(dir, "run", &run, &files));
    let sweep = [&["sweep", "--virtual-time", "--seed", "7"][..], &load]
        .concat()
        .into_iter()
        .chain(["--rate-steps", "2,8", "--requests", "30"])
        .collect::<Vec<_>>();
    all.extend(written(
        dir,
        "sweep",
        &sweep,
        &["report.json", "summary.csv"],
    ));
    let capacity = [
        &["capacity", "--virtual-time", "--seed", "3"][..],
        &load,
        &slo,
    ]
    .concat();
    all.extend(written(
        dir,
        "capacity",
        &capacity,
        &["report.json", "summary.csv"],
    ));
    let plan = [
        &["plan", "--simulate", "--peak-rps", "40", "--seed", "3"][..],
        &load,
        &slo,
    ]
    .concat()
    .into_iter()
    .chain(["--json"])
    .collect::<Vec<_>>();
    all.extend(printed("plan --simulate --json", &plan, true));
    for name in ["run", "sweep"] {
        let journal = dir.join(name).join("requests.jsonl");
        let journal = journal.to_str().unwrap();
        let rebuilt = format!("report {name} --json");
        all.extend(printed(&rebuilt, &["report", journal, "--json"], true));
    }
    all.extend(printed("sim --explain", &["sim", "--explain"], false));
    all
}

fn digests_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(DIGESTS)
}

fn blessed() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(digests_path()).unwrap_or_default();
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| line.rsplit_once(' '))
        .map(|(name, digest)| (name.to_string(), digest.to_string()))
        .collect()
}

#[test]
fn virtual_time_outputs_are_byte_identical_to_the_blessed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let outputs = outputs(dir.path());
    let digests: Vec<(String, String)> = outputs
        .iter()
        .map(|(name, bytes)| (name.clone(), format!("{:016x}", fnv1a(bytes.as_bytes()))))
        .collect();
    if std::env::var_os("GOODPUT_BLESS").is_some() {
        let mut text = String::from(
            "# Digests of the golden outputs (crates/cli/tests/golden.rs): name, FNV-1a 64 of the\n\
             # normalised bytes. Re-bless with GOODPUT_BLESS=1 only for a change meant to move them.\n",
        );
        for (name, digest) in &digests {
            text.push_str(&format!("{name} {digest}\n"));
        }
        std::fs::write(digests_path(), text).unwrap();
        return;
    }
    let blessed = blessed();
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("golden");
    let mut moved = Vec::new();
    for ((name, digest), (_, bytes)) in digests.iter().zip(&outputs) {
        if blessed.get(name) != Some(digest) {
            let file = kept.join(name.replace(['/', ' '], "_"));
            std::fs::create_dir_all(&kept).unwrap();
            std::fs::write(&file, bytes).unwrap();
            moved.push(format!(
                "{name}: {digest}, blessed {:?} (written to {})",
                blessed.get(name),
                file.display()
            ));
        }
    }
    assert_eq!(blessed.len(), digests.len(), "outputs named in {DIGESTS}");
    assert!(
        moved.is_empty(),
        "golden outputs moved — if the change means to move them, re-bless with \
         GOODPUT_BLESS=1 and say why in the commit:\n{}",
        moved.join("\n")
    );
}

#[test]
fn normalising_removes_only_what_names_the_moment() {
    let text = r#"{"run":{"started_at":"2026-12-06T22:40:23Z","seed":7},"x":[{"request_id":"a-0","end_us":5}]}
{"headers":[["date","now"]],"index":1}"#;
    assert_eq!(
        normalised_json(text),
        "{\"run\":{\"seed\":7},\"x\":[{\"end_us\":5}]}\n{\"index\":1}\n"
    );
    let md = "# run\nvirtual API · started 2026-12-06 · seed 7 · goodput 0.1.0 (abc)\nrest";
    assert_eq!(normalised_markdown(md), "# run\nvirtual API\nrest");
    // FNV-1a 64's published test vectors.
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
}
