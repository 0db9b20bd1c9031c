//! The in-memory Kubernetes API ([`fleetwright_sim::memory`]) served over HTTP on 127.0.0.1, for
//! tests that need a real listening API server (the Lambda processes of the end-to-end stack,
//! the client's TLS-less URL handling, the `Authorization` header of every request).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

pub use fleetwright_sim::memory::{MemoryApi, State};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;

/// A running fake; the server task lives as long as the test's runtime.
pub struct FakeApi {
    pub addr: SocketAddr,
    pub api: MemoryApi,
    pub state: Arc<Mutex<State>>,
}

impl FakeApi {
    pub async fn start(objects: BTreeMap<String, Vec<Value>>) -> FakeApi {
        let api = MemoryApi::new(objects);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let shared = api.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let api = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(api.clone(), req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        let state = api.state.clone();
        FakeApi { addr, api, state }
    }

    pub fn client(&self) -> kube::Client {
        let mut config = kube::Config::new(format!("http://{}", self.addr).parse().unwrap());
        config.default_retry = false;
        kube::Client::try_from(config).unwrap()
    }

    pub fn requests_to(&self, path: &str) -> Vec<String> {
        self.api.requests_to(path)
    }
}

async fn handle(
    api: MemoryApi,
    req: Request<Incoming>,
) -> Result<hyper::Response<http_body_util::Full<hyper::body::Bytes>>, Infallible> {
    let uri = req.uri().to_string();
    let method = req.method().clone();
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Ok(api
        .respond(method.as_str(), &uri, &authorization, &body)
        .into_http())
}
