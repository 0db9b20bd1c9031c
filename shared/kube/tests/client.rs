//! The EKS client sends the IAM token as a bearer token to the configured endpoint, and a bad
//! CA is refused with the endpoint named.

mod fake_api;

use std::collections::BTreeMap;
use std::time::SystemTime;

use aws_credential_types::Credentials;
use fake_api::FakeApi;
use fleetwright_kube::client::{eks_client, EksEndpoint};
use fleetwright_kube::eks_token::token;
use fleetwright_kube::snapshot::SnapshotReader;

#[tokio::test]
async fn eks_client_authenticates_with_the_iam_token() {
    let api = FakeApi::start(BTreeMap::new()).await;
    let creds = Credentials::new("AKID", "secret", None, None, "test");
    let t = token(&creds, "us-east-1", "prod", SystemTime::now()).unwrap();
    let endpoint = EksEndpoint {
        url: format!("http://{}", api.addr),
        certificate_authority_data: None,
    };
    let client = eks_client(&endpoint, &t.token).await.unwrap();
    SnapshotReader::new(client).read().await.unwrap();
    let auth = api.state.lock().unwrap().authorizations.clone();
    assert!(!auth.is_empty());
    assert!(
        auth.iter().all(|a| a == &format!("Bearer {}", t.token)),
        "{auth:?}"
    );
}

#[tokio::test]
async fn a_malformed_ca_is_refused_with_the_endpoint_named() {
    let endpoint = EksEndpoint {
        url: "https://example.eks.amazonaws.com".into(),
        certificate_authority_data: Some("not base64 !!".into()),
    };
    let Err(err) = eks_client(&endpoint, "k8s-aws-v1.x").await else {
        panic!("a malformed CA must be refused");
    };
    let err = err.to_string();
    assert!(err.contains("https://example.eks.amazonaws.com"), "{err}");
}
