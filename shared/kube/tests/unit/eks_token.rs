use super::*;

fn decode(token: &str) -> String {
    let b64 = token.strip_prefix(TOKEN_PREFIX).expect("prefix");
    String::from_utf8(
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

fn query(url: &str) -> Vec<(String, String)> {
    url.split_once('?')
        .unwrap()
        .1
        .split('&')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (
                k.to_string(),
                percent_encoding::percent_decode_str(v)
                    .decode_utf8()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

#[test]
fn token_is_a_presigned_get_caller_identity_url_bound_to_the_cluster() {
    let creds = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
    let t = token(&creds, "us-west-2", "prod-cluster", at(1_790_000_000)).unwrap();
    assert!(t.token.starts_with("k8s-aws-v1."));
    assert!(!t.token.contains('=') && !t.token.contains('+') && !t.token.contains('/'));
    let url = decode(&t.token);
    assert!(
        url.starts_with(
            "https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&"
        ),
        "{url}"
    );
    let q = query(&url);
    let get = |k: &str| {
        q.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(get("X-Amz-Algorithm"), "AWS4-HMAC-SHA256");
    assert_eq!(get("X-Amz-Expires"), "60");
    let signed: Vec<String> = get("X-Amz-SignedHeaders")
        .split(';')
        .map(str::to_string)
        .collect();
    assert!(signed.contains(&"host".to_string()), "{signed:?}");
    assert!(signed.contains(&"x-k8s-aws-id".to_string()), "{signed:?}");
    assert!(get("X-Amz-Credential").starts_with("AKIDEXAMPLE/"));
    assert!(get("X-Amz-Credential").ends_with("/us-west-2/sts/aws4_request"));
    assert_eq!(get("X-Amz-Signature").len(), 64);
    assert!(get("X-Amz-Signature")
        .chars()
        .all(|c| c.is_ascii_hexdigit()));
    assert_eq!(t.expires_at, at(1_790_000_000) + TOKEN_LIFETIME);
}

#[test]
fn signature_depends_on_cluster_and_time_and_session_tokens_are_carried() {
    let creds = Credentials::new("AKID", "secret", Some("session-token".into()), None, "test");
    let a = token(&creds, "us-east-1", "a", at(1_790_000_000))
        .unwrap()
        .token;
    let again = token(&creds, "us-east-1", "a", at(1_790_000_000))
        .unwrap()
        .token;
    let other_cluster = token(&creds, "us-east-1", "b", at(1_790_000_000))
        .unwrap()
        .token;
    let later = token(&creds, "us-east-1", "a", at(1_790_000_100))
        .unwrap()
        .token;
    assert_eq!(a, again);
    assert_ne!(a, other_cluster);
    assert_ne!(a, later);
    assert!(query(&decode(&a))
        .iter()
        .any(|(k, v)| k == "X-Amz-Security-Token" && v == "session-token"));
}

#[test]
fn cache_reuses_until_a_minute_before_expiry() {
    let creds = Credentials::new("AKID", "secret", None, None, "test");
    let mut cache = TokenCache::default();
    let first = cache
        .get(&creds, "us-east-1", "c", at(1_000_000))
        .unwrap()
        .token
        .clone();
    let reused = cache
        .get(&creds, "us-east-1", "c", at(1_000_000 + 13 * 60))
        .unwrap()
        .token
        .clone();
    assert_eq!(first, reused);
    let renewed = cache
        .get(&creds, "us-east-1", "c", at(1_000_000 + 14 * 60 + 1))
        .unwrap()
        .token
        .clone();
    assert_ne!(first, renewed);
}
