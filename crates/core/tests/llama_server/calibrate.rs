//! The calibration's cache probe against llama-server: four slots with a cache each (`-np 4
//! -c 2048`, 512 tokens a slot) run all four prompts of 1.5 slot contexts; four slots sharing
//! one cache (`--kv-unified`, each reporting the whole 2,048) fill it and are refused — the
//! difference the slot-split probe cannot see where micro-batches cost nothing.

use goodput_core::decide::calibrate::{CacheReading, cache_probe, kv_sharing, server_facts};
use goodput_core::http::HttpConfig;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use crate::client;
use crate::server::{LlamaServer, Model, Options};

/// What the cache probe reads on the small model, four slots, `-c 2048` and `extra`.
async fn reading(extra: &[&str]) -> (u32, Option<CacheReading>) {
    let mut options = Options::new(Model::Small, 4);
    options.extra = ["-t", "1", "-c", "2048"]
        .iter()
        .chain(extra)
        .map(ToString::to_string)
        .collect();
    let server = LlamaServer::start(&options);
    let http = client(&server, HttpConfig::default());
    let facts = server_facts(&http, Duration::from_secs(10)).await;
    let context = facts.context_per_slot.unwrap();
    let probe = cache_probe(facts.slots.unwrap(), context).unwrap();
    let found = kv_sharing((&http, "m"), &probe, (7, &CancellationToken::new())).await;
    (context, found.unwrap())
}

#[tokio::test]
async fn the_cache_probe_tells_a_shared_cache_from_a_cache_per_slot() {
    let (context, per_slot) = reading(&[]).await;
    assert_eq!(context, 512);
    assert_eq!(per_slot, Some(CacheReading::PerSlot));
    let (context, shared) = reading(&["--kv-unified"]).await;
    assert_eq!(context, 2048);
    assert!(
        matches!(shared, Some(CacheReading::Shared { refused }) if refused >= 1),
        "{shared:?}"
    );
}
