use super::*;

fn template(name: &str, cluster: &str, hours_old: i64, now: DateTime<Utc>) -> Listed {
    let tags = [
        (
            format!("kubernetes.io/cluster/{cluster}"),
            "owned".to_string(),
        ),
        ("karpenter.k8s.aws/cluster".into(), cluster.to_string()),
        ("eks:eks-cluster-name".into(), cluster.to_string()),
        ("karpenter.sh/nodepool".into(), "default".into()),
    ];
    Listed {
        id: format!("lt-{name}"),
        name: format!("fleetwright/{cluster}/{name}"),
        created: Some(now - Duration::hours(hours_old)),
        tags: tags.into_iter().collect(),
    }
}

/// Only this cluster's old templates that no launch used lately are stale; another
/// cluster's, one missing an ownership tag, a young one and a recently used one are kept.
#[test]
fn only_this_clusters_old_unused_templates_are_stale() {
    let now = Utc::now();
    let mut untagged = template("untagged", "dev", 5, now);
    untagged.tags.remove("kubernetes.io/cluster/dev");
    let mut renamed = template("renamed", "dev", 5, now);
    renamed.name = "someone-elses".into();
    let listed = vec![
        template("old", "dev", 5, now),
        template("young", "dev", 0, now),
        template("used", "dev", 5, now),
        template("other", "prod", 5, now),
        untagged,
        renamed,
    ];
    let used = [(
        "fleetwright/dev/used".to_string(),
        now - Duration::minutes(5),
    )]
    .into();
    let names: Vec<&str> = stale("dev", &listed, &used, now)
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["fleetwright/dev/old"]);
    let long_ago = [("fleetwright/dev/used".to_string(), now - Duration::hours(2))].into();
    assert_eq!(stale("dev", &listed, &long_ago, now).len(), 2);
}
