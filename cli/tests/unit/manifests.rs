use super::*;

#[test]
fn the_url_needs_https_and_a_well_formed_token() {
    assert_eq!(
        webhook_url(
            "https://abc.lambda-url.us-east-1.on.aws/",
            Some("0123456789abcdef")
        )
        .unwrap(),
        "https://abc.lambda-url.us-east-1.on.aws/admit/0123456789abcdef"
    );
    assert!(webhook_url("http://abc/", None)
        .unwrap_err()
        .to_string()
        .contains("--function-url"));
    assert!(webhook_url(
        "https://abc/admit/0123456789abcdef",
        Some("0123456789abcdef")
    )
    .unwrap_err()
    .to_string()
    .contains("the Function URL itself"));
    assert!(webhook_url("https://abc/", Some("short"))
        .unwrap_err()
        .to_string()
        .contains("--token"));
}

#[test]
fn skip_crds_leaves_out_only_the_crds() {
    let args = |skip_crds| ManifestsArgs {
        function_url: "https://abc.lambda-url.us-east-1.on.aws/".into(),
        token: "0123456789abcdef".into(),
        group: "fleetwright".into(),
        namespace: "karpenter".into(),
        node_role: None,
        cluster_name: None,
        skip_crds,
    };
    let kinds = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("kind: "))
            .map(str::to_string)
            .collect()
    };
    let all = kinds(&render(&args(false)).unwrap());
    let skipped = kinds(&render(&args(true)).unwrap());
    assert!(
        all.iter()
            .filter(|k| *k == "CustomResourceDefinition")
            .count()
            >= 3
    );
    let rest: Vec<String> = all
        .into_iter()
        .filter(|k| k != "CustomResourceDefinition")
        .collect();
    assert_eq!(skipped, rest);
}
