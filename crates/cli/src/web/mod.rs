//! The web app of `goodput ui` (axum): routes over a history store, each page the HTML
//! exporter's ([`goodput_core::html`]) — the runs (`/`, filtered by the query string:
//! `model`, `target`, `tag=KEY=VALUE` (repeatable), `since`, `until` (days), `last`), a run's
//! report (`/runs/ID`, and its `report.json`), the comparison of ticked runs
//! (`/compare?run=ID&run=ID…`, the oldest the baseline) and a figure's trend
//! (`/trend?metric=PATH&by=tag:NAME` with the same filters). Every view is a plain GET, so its
//! address can be shared. Each request opens the store on a blocking thread ([`pages`]
//! builds the page there); nothing is computed here.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use crate::options::store::StoreSpec;

mod pages;
mod params;

/// The query string, pair by pair (a key may repeat).
type Pairs = Query<Vec<(String, String)>>;

/// The app's routes over the store `spec` names.
pub(crate) fn router(spec: StoreSpec) -> Router {
    Router::new()
        .route("/", get(runs))
        .route("/runs/{id}", get(report))
        .route("/runs/{id}/report.json", get(report_json))
        .route("/compare", get(compare))
        .route("/trend", get(trend))
        .fallback(not_found)
        .with_state(Arc::new(spec))
}

type Spec = State<Arc<StoreSpec>>;

async fn runs(State(spec): Spec, Query(pairs): Pairs) -> Response {
    html(move || pages::runs(&spec, &params::Params::parse(&pairs))).await
}

async fn trend(State(spec): Spec, Query(pairs): Pairs) -> Response {
    html(move || pages::trend(&spec, &params::Params::parse(&pairs))).await
}

async fn compare(State(spec): Spec, Query(pairs): Pairs) -> Response {
    html(move || pages::compare(&spec, &params::Params::parse(&pairs))).await
}

async fn report(State(spec): Spec, Path(id): Path<String>) -> Response {
    html(move || pages::report(&spec, run_id(&id)?)).await
}

async fn report_json(State(spec): Spec, Path(id): Path<String>) -> Response {
    let page = blocking(move || pages::report_json(&spec, run_id(&id)?)).await;
    match page {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(error) => error.into_response(),
    }
}

async fn not_found() -> Response {
    PageError::NotFound("no such page".into()).into_response()
}

fn run_id(text: &str) -> Result<i64, PageError> {
    text.parse()
        .map_err(|_| PageError::NotFound(format!("`{text}` is not a run id")))
}

/// Why a page could not be served.
#[derive(Debug)]
pub(crate) enum PageError {
    /// No such run or page (404).
    NotFound(String),
    /// A request that cannot be answered as asked (400).
    BadRequest(String),
    /// The store failed (500).
    Store(anyhow::Error),
}

impl From<anyhow::Error> for PageError {
    fn from(error: anyhow::Error) -> Self {
        PageError::Store(error)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            PageError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            PageError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            PageError::Store(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")),
        };
        let text = message
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        let body = format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>goodput ui · {}</title></head><body style=\"font-family:system-ui,sans-serif;\
             margin:24px\"><h1>{}</h1><p id=\"error\">{text}</p><p><a href=\"/\">All runs</a></p>\
             </body></html>\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("error")
        );
        (status, Html(body)).into_response()
    }
}

/// Runs `work` on a blocking thread (the store's clients block).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, PageError> + Send + 'static,
) -> Result<T, PageError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| PageError::Store(anyhow::anyhow!("the page failed: {e}")))?
}

async fn html(work: impl FnOnce() -> Result<String, PageError> + Send + 'static) -> Response {
    match blocking(work).await {
        Ok(page) => Html(page).into_response(),
        Err(error) => error.into_response(),
    }
}
