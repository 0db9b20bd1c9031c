use super::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": []}})
}

#[tokio::test]
async fn the_in_process_client_lists_in_pages_and_records_requests() {
    let api = MemoryApi::new(BTreeMap::from([(
        "/api/v1/pods".to_string(),
        (0..5).map(|i| pod(&format!("p{i}"))).collect(),
    )]));
    let pods: Api<Pod> = Api::all(api.client());
    let page = pods.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.metadata.continue_.as_deref(), Some("2"));
    assert_eq!(page.metadata.remaining_item_count, Some(3));
    let rest = pods
        .list(&ListParams::default().continue_token("2"))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 3);
    assert_eq!(api.requests_to("/api/v1/pods").len(), 2);
}

#[tokio::test]
async fn unknown_paths_are_a_not_found_status_and_nodeclaims_get_generated_names() {
    let api = MemoryApi::new(BTreeMap::new());
    let client = api.client();
    let namespaced: Api<Pod> = Api::namespaced(client.clone(), "default");
    let err = namespaced
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod("x")).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err}"
    );
    let reply = api.respond(
        "POST",
        "/apis/karpenter.sh/v1/nodeclaims",
        "",
        json!({"metadata": {"generateName": "default-"}})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(reply.status, 201);
    assert!(reply.body["metadata"]["name"]
        .as_str()
        .unwrap()
        .starts_with("default-"));
    let reply = api.respond("POST", "/apis/karpenter.sh/v1/nodeclaims", "", b"{}");
    assert_eq!(reply.status, 422);
}
