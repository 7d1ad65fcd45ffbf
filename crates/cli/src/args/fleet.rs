//! `goodput run`'s fleet flags turned into [`FleetOptions`]: the correlation id header
//! (`--request-id-header`, `--no-request-id`), a model mix (`--model a=70%,b=30%`), an
//! adapter mix (`--lora x=20%,…`), SLO classes (`--class NAME=SHARE%:SLO`), and several
//! targets (`--target` repeated, `--targets FILE`) with their routing (`--route`) and the
//! header naming the replica that served each request (`--replica-header`).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use goodput_core::backend::fleet::Routing;
use goodput_core::metrics::Slo;
use goodput_core::report::run::ClassInfo;
use goodput_core::workload::mix::{Mix, Shares};
use http::HeaderName;

use crate::options::run::{FleetOptions, FleetTargetOptions};

/// The header that carries each request's correlation id unless told otherwise.
pub(crate) const DEFAULT_REQUEST_ID_HEADER: &str = "x-request-id";

/// Who is asked what, and how each request is told apart.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct FleetArgs {
    /// Send each request's correlation id (`<run>-<step>-<index>`, unique within the run) in
    /// this header, and record it with the server's own id in requests.jsonl and requests.csv
    /// [default: X-Request-Id].
    #[arg(long, value_name = "NAME", help_heading = "Target")]
    pub(crate) request_id_header: Option<String>,
    /// Send no correlation id header.
    #[arg(long, conflicts_with = "request_id_header", help_heading = "Target")]
    pub(crate) no_request_id: bool,
    /// LoRA adapters and their shares of the requests, e.g. `sql=20%,chat=10%`: an adapter's
    /// requests name it as their `model` (as vLLM and SGLang route adapters), the rest go to
    /// the base model (--model); every figure is also reported per adapter (the base model's
    /// requests as `base`).
    #[arg(long, value_name = "NAME=SHARE%,…", help_heading = "Target")]
    pub(crate) lora: Option<String>,
    /// An SLO class, repeatable: its name, its share of the requests and its own thresholds,
    /// e.g. `--class interactive=80%:ttft=500ms,tpot=50ms --class batch=20%:e2e=60s` (the
    /// shares add up to 100%); each request's class is drawn from the seed, and each class's
    /// goodput is judged against its own SLO (--slo still judges the whole step).
    #[arg(
        long = "class",
        value_name = "NAME=SHARE%:SLO",
        help_heading = "Measurement"
    )]
    pub(crate) classes: Vec<String>,
    /// A file of the fleet's targets, one `[NAME=]URL` per line (`#` starts a comment), after
    /// those of --target.
    #[arg(long = "targets", value_name = "FILE", help_heading = "Target")]
    pub(crate) targets_file: Option<PathBuf>,
    /// How requests are spread over several targets: `round-robin` (each in turn),
    /// `least-outstanding` (the target with the fewest of this client's requests in flight),
    /// or `weighted:W1,W2,…` (one weight per target, in order; smooth weighted round-robin)
    /// [default: round-robin].
    #[arg(long, value_name = "POLICY", help_heading = "Target")]
    pub(crate) route: Option<String>,
    /// A response header naming the replica that served each request (a gateway's or
    /// router's, e.g. `x-served-by`): recorded with every request, and every figure is also
    /// reported per replica.
    #[arg(long, value_name = "NAME", help_heading = "Target")]
    pub(crate) replica_header: Option<String>,
}

/// The URL of a `--target` value (`NAME=URL` or `URL`).
pub(crate) fn target_url(value: &str) -> &str {
    split_target(value).1
}

/// A `--target` value's name, if it gives one, and its URL: `NAME=` is a name when it holds
/// neither `/` nor `:` (a URL's query may hold `=`).
fn split_target(value: &str) -> (Option<&str>, &str) {
    match value.split_once('=') {
        Some((name, url)) if !name.is_empty() && !name.contains(['/', ':']) => {
            (Some(name.trim()), url.trim())
        }
        _ => (None, value.trim()),
    }
}

/// Whether `--model`'s value is a mix (`name=share%,…`) rather than one model's name.
pub(crate) fn is_mix(model: &str) -> bool {
    model.contains('=')
}

impl FleetArgs {
    /// The fleet options: `model` is `--model` as given; `openai`: whether the API names its
    /// model in an OpenAI body (a mix cannot route `--api http` or `--api v2` requests).
    pub(crate) fn options(&self, model: Option<&str>, openai: bool) -> Result<FleetOptions> {
        let (class_shares, classes) = self.classes()?;
        let mut mix = self.mix(model, openai)?;
        mix.classes = class_shares;
        Ok(FleetOptions {
            request_id_header: self.request_id_header()?,
            mix,
            classes,
            targets: Vec::new(),
            routing: Routing::RoundRobin,
            replica_header: self.replica_header()?,
        })
    }

    /// Every target: `--target`'s values, then `--targets FILE`'s lines, each named (its
    /// `NAME=`, else its URL's host and port), and `--route` checked against them.
    pub(crate) fn targets(&self, given: &[String]) -> Result<(Vec<FleetTargetOptions>, Routing)> {
        let mut values: Vec<String> = given.to_vec();
        if let Some(path) = &self.targets_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--targets {}", path.display()))?;
            let lines = text
                .lines()
                .map(|line| line.split('#').next().unwrap_or(""));
            values.extend(
                lines
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(String::from),
            );
            if values.len() == given.len() {
                bail!("--targets {}: the file lists no target", path.display());
            }
        }
        let targets = values
            .iter()
            .map(|value| {
                let (name, url) = split_target(value);
                let parsed = goodput_core::http::Target::parse(url)
                    .with_context(|| format!("--target {value}"))?;
                let label = name.map_or_else(|| parsed.authority().to_string(), String::from);
                Ok(FleetTargetOptions {
                    label,
                    url: url.to_string(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut names = std::collections::BTreeSet::new();
        if let Some(twice) = targets.iter().find(|t| !names.insert(t.label.as_str())) {
            bail!(
                "--target: two targets are named {:?}; name each (NAME=URL)",
                twice.label
            );
        }
        if targets.len() < 2 && self.route.is_some() {
            bail!("--route spreads requests over several targets: give --target more than once");
        }
        Ok((targets.clone(), self.routing(targets.len())?))
    }

    /// `--route`, checked against `targets` targets.
    fn routing(&self, targets: usize) -> Result<Routing> {
        let Some(route) = self.route.as_deref().map(str::trim) else {
            return Ok(Routing::RoundRobin);
        };
        match route {
            "round-robin" => Ok(Routing::RoundRobin),
            "least-outstanding" => Ok(Routing::LeastOutstanding),
            _ => {
                let Some(weights) = route.strip_prefix("weighted:") else {
                    bail!(
                        "--route {route:?}: round-robin, least-outstanding or weighted:W1,W2,… \
                         (one weight per target)"
                    );
                };
                let weights = weights
                    .split(',')
                    .map(|w| w.trim().parse::<u32>())
                    .collect::<Result<Vec<_>, _>>()
                    .with_context(|| format!("--route {route:?}: weights are whole numbers"))?;
                if weights.len() != targets {
                    bail!(
                        "--route {route:?}: {} weights for {targets} targets (one per target, \
                         in order)",
                        weights.len()
                    );
                }
                if weights.iter().all(|w| *w == 0) {
                    bail!("--route {route:?}: at least one weight must be positive");
                }
                Ok(Routing::Weighted(weights))
            }
        }
    }

    /// `--replica-header`, checked.
    fn replica_header(&self) -> Result<Option<HeaderName>> {
        let Some(name) = self.replica_header.as_deref() else {
            return Ok(None);
        };
        HeaderName::from_bytes(name.trim().as_bytes())
            .map(Some)
            .map_err(|_| {
                anyhow::anyhow!("--replica-header: {name:?} is not a valid HTTP header name")
            })
    }

    /// `--class`, each `NAME=SHARE%:SLO`: the shares (adding up to 100 %) and each class.
    fn classes(&self) -> Result<(Option<Shares>, Vec<ClassInfo>)> {
        if self.classes.is_empty() {
            return Ok((None, Vec::new()));
        }
        let mut named = Vec::new();
        let mut slos = Vec::new();
        for class in &self.classes {
            let Some((share, slo)) = class.split_once(':') else {
                bail!("--class {class:?}: NAME=SHARE%:SLO, e.g. interactive=80%:ttft=500ms");
            };
            let slo = Slo::parse(slo).with_context(|| format!("--class {class:?}"))?;
            if slo.thresholds.is_empty() && slo.objectives.is_empty() {
                bail!("--class {class:?}: the class needs an SLO, e.g. ttft=500ms,tpot=50ms");
            }
            named.push(share.trim().to_string());
            slos.push(slo.to_string());
        }
        let shares = Shares::parse(&named.join(","), false).context("--class")?;
        let classes = shares
            .entries()
            .iter()
            .zip(slos)
            .map(|((name, share), slo)| ClassInfo {
                name: name.clone(),
                share: *share,
                slo,
            })
            .collect();
        Ok((Some(shares), classes))
    }

    /// The model and adapter mixes, checked.
    fn mix(&self, model: Option<&str>, openai: bool) -> Result<Mix> {
        let models = model
            .filter(|model| is_mix(model))
            .map(|text| Shares::parse(text, false))
            .transpose()
            .context("--model")?;
        let adapters = self
            .lora
            .as_deref()
            .map(|text| Shares::parse(text, true).and_then(Shares::adapters))
            .transpose()
            .context("--lora")?;
        if models.is_some() && adapters.is_some() {
            bail!(
                "--lora goes with one base model: adapters are loaded on it, so --model names \
                 one model, not a mix"
            );
        }
        let mixed = models.is_some() || adapters.is_some();
        if mixed && !openai {
            bail!(
                "--model mixes and --lora name each request's model in an OpenAI body: use \
                 --api chat, completions or responses"
            );
        }
        Ok(Mix {
            models,
            adapters,
            classes: None,
        })
    }

    /// `--request-id-header`, checked (`None`: `--no-request-id`).
    fn request_id_header(&self) -> Result<Option<HeaderName>> {
        if self.no_request_id {
            return Ok(None);
        }
        let name = self
            .request_id_header
            .as_deref()
            .unwrap_or(DEFAULT_REQUEST_ID_HEADER);
        if name.trim().is_empty() {
            bail!(
                "--request-id-header: the header name is empty (use --no-request-id to send none)"
            );
        }
        let header = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
            anyhow::anyhow!("--request-id-header: {name:?} is not a valid HTTP header name")
        })?;
        if goodput_core::record::SECRET_HEADERS.contains(&header.as_str()) {
            bail!("--request-id-header: {name:?} is a credential header; name another");
        }
        Ok(Some(header))
    }
}
