//! The SAM template (`infra/template.yaml`) read as data: the safety properties a security
//! reviewer checks (scoped termination, no `*` on `*`, exact interruption rules), the wiring the
//! functions rely on (batch item failures, a single tick), and agreement with the code (the
//! tags Fleetwright puts on instances satisfy the IAM conditions; every variable is a setting).

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};
use serde_yaml::Value;

const CLUSTER: &str = "dev";

fn template() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../infra/template.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn resources(t: &Value) -> Vec<(String, &Value)> {
    t["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str().unwrap().to_string(), v))
        .collect()
}

fn of_type<'a>(t: &'a Value, kind: &str) -> Vec<(String, &'a Value)> {
    resources(t)
        .into_iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(kind))
        .collect()
}

/// A YAML value as JSON, with `!Sub` strings resolved for cluster `dev` (other variables
/// become `X`) and parsed when they hold a JSON policy document.
fn resolve(v: &Value) -> Json {
    match v {
        Value::Tagged(tagged) if tagged.tag == "Sub" => {
            let text = tagged.value.as_str().unwrap_or_default();
            let mut out = text
                .replace("${ClusterName}", CLUSTER)
                .replace("${WebhookTokenParameter}", "/fleetwright/webhook-token");
            while let Some(start) = out.find("${") {
                let end = out[start..].find('}').unwrap() + start;
                out.replace_range(start..=end, "X");
            }
            serde_json::from_str(&out).unwrap_or(Json::String(out))
        }
        Value::Tagged(tagged) => {
            json!({ tagged.tag.to_string().trim_start_matches('!'): resolve(&tagged.value) })
        }
        Value::Mapping(m) => Json::Object(
            m.iter()
                .map(|(k, v)| (k.as_str().unwrap_or_default().to_string(), resolve(v)))
                .collect(),
        ),
        Value::Sequence(items) => Json::Array(items.iter().map(resolve).collect()),
        other => serde_json::to_value(other).unwrap(),
    }
}

/// Every IAM statement of the template: managed policies, role policies and queue policies.
fn statements(t: &Value) -> Vec<Json> {
    let mut docs = Vec::new();
    for (_, r) in resources(t) {
        let props = &r["Properties"];
        match r["Type"].as_str().unwrap() {
            "AWS::IAM::ManagedPolicy" | "AWS::SQS::QueuePolicy" => {
                docs.push(resolve(&props["PolicyDocument"]))
            }
            "AWS::IAM::Role" => {
                for p in props["Policies"].as_sequence().into_iter().flatten() {
                    docs.push(resolve(&p["PolicyDocument"]));
                }
            }
            _ => {}
        }
    }
    docs.iter()
        .flat_map(|d| d["Statement"].as_array().cloned().unwrap())
        .collect()
}

fn list(v: &Json) -> Vec<String> {
    match v {
        Json::String(s) => vec![s.clone()],
        Json::Array(items) => items
            .iter()
            .map(|i| i.as_str().unwrap_or("<intrinsic>").to_string())
            .collect(),
        _ => vec!["<intrinsic>".into()],
    }
}

fn actions(s: &Json) -> Vec<String> {
    list(&s["Action"])
}

#[test]
fn every_terminate_and_reboot_statement_is_scoped_to_this_clusters_nodepool_instances() {
    let t = template();
    for action in ["ec2:TerminateInstances", "ec2:RebootInstances"] {
        scoped_to_nodepool_instances(&t, action);
    }
}

fn scoped_to_nodepool_instances(t: &Value, action: &str) {
    let terminating: Vec<Json> = statements(t)
        .into_iter()
        .filter(|s| actions(s).iter().any(|a| a == action || a == "ec2:*"))
        .collect();
    assert!(
        !terminating.is_empty(),
        "the controller must be able to {action}"
    );
    for s in terminating {
        assert_eq!(s["Effect"], "Allow");
        let c = &s["Condition"];
        assert_eq!(
            c["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/dev"], "owned",
            "{s}"
        );
        assert_eq!(
            c["StringLike"]["aws:ResourceTag/karpenter.sh/nodepool"], "*",
            "{s}"
        );
    }
}

#[test]
fn no_statement_allows_every_action_on_every_resource() {
    for s in statements(&template()) {
        let any_action = actions(&s).iter().any(|a| a == "*");
        let any_resource = list(&s["Resource"]).iter().any(|r| r == "*");
        assert!(!(any_action && any_resource), "{s}");
        // The Price List API has no resources to name, and its endpoint's region is not the
        // cluster's: its one read is allowed on every resource, in any region.
        if actions(&s) == ["pricing:GetProducts"] {
            continue;
        }
        if s["Effect"] == "Allow" && any_resource {
            let all_describes = actions(&s).iter().all(|a| a.starts_with("ec2:Describe"));
            assert!(all_describes, "only EC2 reads may name every resource: {s}");
            assert_eq!(
                s["Condition"]["StringEquals"]["aws:RequestedRegion"], "X",
                "{s}"
            );
        }
    }
}

#[test]
fn creation_needs_the_cluster_and_nodepool_request_tags_that_the_code_sends() {
    let t = template();
    let creating: Vec<Json> = statements(&t)
        .into_iter()
        .filter(|s| {
            list(&s["Resource"])
                .iter()
                .any(|r| r.ends_with(":instance/*") || r.ends_with(":fleet/*"))
                && actions(s).iter().any(|a| a == "ec2:CreateFleet")
        })
        .collect();
    assert_eq!(creating.len(), 1, "one statement creates instances");
    let c = &creating[0]["Condition"];
    assert_eq!(
        c["StringEquals"]["aws:RequestTag/kubernetes.io/cluster/dev"],
        "owned"
    );
    assert_eq!(c["StringLike"]["aws:RequestTag/karpenter.sh/nodepool"], "*");
    assert_eq!(
        c["StringEquals"]["aws:RequestTag/eks:eks-cluster-name"],
        "dev"
    );

    // The tags the fleet request carries satisfy those conditions.
    let request: fleetwright_aws::fleet::LaunchRequest = serde_json::from_value(json!({
        "nodeclaim": "default-abc12", "nodepool": "default", "nodeclass": "default",
        "instanceTypes": ["m5.large"], "capacityTypes": ["spot"], "zones": [],
        "labels": {}, "taints": [], "startupTaints": [],
    }))
    .unwrap_or_else(|e| panic!("launch request: {e}"));
    let tags = fleetwright_aws::fleet::instance_tags(CLUSTER, &request, &BTreeMap::new());
    assert_eq!(tags["kubernetes.io/cluster/dev"], "owned");
    assert_eq!(tags["eks:eks-cluster-name"], "dev");
    assert_eq!(tags["karpenter.sh/nodepool"], "default");
}

#[test]
fn pass_role_is_only_for_ec2_and_describe_cluster_only_for_this_cluster() {
    let all = statements(&template());
    let pass: Vec<&Json> = all
        .iter()
        .filter(|s| actions(s).iter().any(|a| a == "iam:PassRole"))
        .collect();
    assert_eq!(pass.len(), 1);
    assert_eq!(
        pass[0]["Condition"]["StringEquals"]["iam:PassedToService"],
        "ec2.amazonaws.com"
    );
    let describe: Vec<&Json> = all
        .iter()
        .filter(|s| actions(s).iter().any(|a| a == "eks:DescribeCluster"))
        .collect();
    // The controller's and the interruption role's, each for this cluster only.
    assert_eq!(describe.len(), 2);
    for s in describe {
        assert_eq!(list(&s["Resource"]).len(), 1, "{s}");
        assert!(list(&s["Resource"])[0].ends_with(":cluster/dev"), "{s}");
    }
    // SSM reads: the public AMI parameters, and the webhook's own token parameter (read by
    // the webhook's role only, GetParameter only).
    for s in all
        .iter()
        .filter(|s| actions(s).iter().any(|a| a.starts_with("ssm:")))
    {
        let resources = list(&s["Resource"]);
        if s["Sid"] == "AllowReadingTheToken" {
            assert_eq!(actions(s), ["ssm:GetParameter"]);
            assert_eq!(resources.len(), 1);
            assert!(
                resources[0].ends_with(":parameter/fleetwright/webhook-token"),
                "{resources:?}"
            );
            continue;
        }
        assert!(resources
            .iter()
            .all(|r| r.ends_with("parameter/aws/service/*")));
    }
}

/// The statements of one role's inline policies.
fn role_statements(t: &Value, role: &str) -> Vec<Json> {
    t["Resources"][role]["Properties"]["Policies"]
        .as_sequence()
        .into_iter()
        .flatten()
        .flat_map(|p| {
            resolve(&p["PolicyDocument"])["Statement"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// The interruption function cordons, drains and deletes NodeClaims through the Kubernetes
/// API; it runs as its own role, which can read its queue, find the cluster's endpoint and
/// nudge tick, and nothing else: no launch, no PassRole, no termination, no EC2 at all. The
/// interruption code asks the cloud port only for its in-memory unavailable offerings.
#[test]
fn the_interruption_function_runs_as_a_role_that_cannot_launch_pass_or_terminate() {
    let t = template();
    let function = &t["Resources"]["InterruptionFunction"]["Properties"];
    assert_eq!(
        resolve(&function["Role"]),
        json!({"GetAtt": "InterruptionRole.Arn"})
    );
    let role = &t["Resources"]["InterruptionRole"]["Properties"];
    let managed = resolve(&role["ManagedPolicyArns"]).to_string();
    assert!(!managed.contains("ControllerPolicy"), "{managed}");
    let statements = role_statements(&t, "InterruptionRole");
    let mut allowed: Vec<String> = statements.iter().flat_map(actions).collect();
    allowed.sort();
    assert_eq!(
        allowed,
        [
            "eks:DescribeCluster",
            "events:PutEvents",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "sqs:ReceiveMessage"
        ]
    );
    for s in &statements {
        assert_eq!(s["Effect"], "Allow");
        assert!(list(&s["Resource"]).iter().all(|r| r != "*"), "{s}");
    }
    // Its Kubernetes access: an access entry into the same group as the controller's.
    let entries = of_type(&t, "AWS::EKS::AccessEntry");
    let entry = entries
        .iter()
        .find(|(_, r)| {
            resolve(&r["Properties"]["PrincipalArn"]) == json!({"GetAtt": "InterruptionRole.Arn"})
        })
        .expect("an access entry for the interruption role");
    assert_eq!(
        resolve(&entry.1["Properties"]["KubernetesGroups"]),
        json!([{"Ref": "KubernetesGroup"}])
    );

    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let mut called = std::collections::BTreeSet::new();
    for file in [
        "functions/interruption/src/main.rs",
        "shared/runtime/src/interruption.rs",
        "shared/kube/src/interruption/mod.rs",
    ] {
        let text = std::fs::read_to_string(format!("{root}{file}")).unwrap();
        called.extend(cloud_calls(&text));
    }
    // What stays in the warm container: the unavailable offerings, and the shared handle.
    let local = [
        "mark_unavailable",
        "unavailable",
        "restore_unavailable",
        "clone",
    ];
    assert!(
        called.iter().all(|c| local.contains(&c.as_str())),
        "the interruption code calls the cloud port's {called:?}: give its role what that needs"
    );
}

/// The methods called on a `cloud` value in `text` (`self.cloud.mark_unavailable(…)`, across
/// lines too).
fn cloud_calls(text: &str) -> Vec<String> {
    text.match_indices("cloud")
        .filter_map(|(i, _)| {
            let rest = text[i + "cloud".len()..].trim_start();
            let rest = rest.strip_prefix('.')?.trim_start();
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest[name.len()..].starts_with('(').then_some(name)
        })
        .collect()
}

/// The tick's role does not read the interruption queue: only the interruption role does (the
/// tick's role reads its own follow-up queue, and only that).
#[test]
fn only_the_interruption_role_reads_the_queue() {
    let t = template();
    let all_readers: Vec<Json> = statements(&t)
        .into_iter()
        .filter(|s| actions(s).iter().any(|a| a == "sqs:ReceiveMessage"))
        .collect();
    let (follow_ups, readers): (Vec<Json>, Vec<Json>) = all_readers
        .into_iter()
        .partition(|s| s["Sid"] == "AllowTickFollowUps");
    assert_eq!(follow_ups.len(), 1, "{follow_ups:?}");
    let policy =
        serde_json::to_string(&t["Resources"]["ControllerPolicy"]["Properties"]["PolicyDocument"])
            .unwrap();
    let statement = policy
        .split("\\\"Sid\\\": \\\"AllowTickFollowUps\\\"")
        .nth(1)
        .and_then(|rest| rest.split("\\\"Action\\\"").next())
        .expect("the AllowTickFollowUps statement");
    assert!(
        statement.contains("\\\"Resource\\\": \\\"${TickFollowUpQueue.Arn}\\\""),
        "the follow-up statement names the follow-up queue only: {statement}"
    );
    assert_eq!(readers.len(), 1, "{readers:?}");
    assert_eq!(readers[0]["Sid"], "AllowInterruptionQueueActions");
    assert_eq!(
        role_statements(&t, "InterruptionRole")
            .iter()
            .filter(|s| **s == readers[0])
            .count(),
        1
    );
}

#[test]
fn the_five_interruption_rules_are_exact_and_target_the_queue() {
    let t = template();
    let mut patterns: Vec<Json> = of_type(&t, "AWS::Events::Rule")
        .into_iter()
        .filter(|(_, r)| {
            r["Properties"]["Targets"]
                .as_sequence()
                .unwrap()
                .iter()
                .any(|target| resolve(&target["Arn"])["GetAtt"] == "InterruptionQueue.Arn")
        })
        .map(|(_, r)| resolve(&r["Properties"]["EventPattern"]))
        .collect();
    patterns.sort_by_key(|p| p.to_string());
    let pattern = |source: &str, detail: &str| json!({"source": [source], "detail-type": [detail]});
    let mut expected = vec![
        pattern("aws.health", "AWS Health Event"),
        pattern("aws.ec2", "EC2 Spot Instance Interruption Warning"),
        pattern("aws.ec2", "EC2 Instance Rebalance Recommendation"),
        pattern("aws.ec2", "EC2 Instance State-change Notification"),
        pattern(
            "aws.ec2",
            "EC2 Capacity Reservation Instance Interruption Warning",
        ),
    ];
    expected.sort_by_key(|p| p.to_string());
    assert_eq!(patterns, expected);
}

#[test]
fn the_queue_is_encrypted_short_lived_redriven_and_https_only() {
    let t = template();
    let queue = &t["Resources"]["InterruptionQueue"]["Properties"];
    assert_eq!(queue["SqsManagedSseEnabled"], true);
    // Lambda advises at least 5 receives for an SQS source: with reserved concurrency the
    // poller can receive a message while the function is throttled, and that counts.
    let receives = queue["RedrivePolicy"]["maxReceiveCount"].as_u64().unwrap();
    assert!(receives >= 5, "maxReceiveCount {receives} < 5");
    // A message must get all its receives, and the one that moves it to the DLQ, before it
    // expires, or a failing one never reaches the DLQ: retention >= (receives + 1) x visibility.
    let retention = queue["MessageRetentionPeriod"].as_u64().unwrap();
    let visibility = queue["VisibilityTimeout"].as_u64().unwrap();
    assert!(
        retention >= (receives + 1) * visibility,
        "retention {retention}s < ({receives} + 1) x {visibility}s: messages expire before the DLQ"
    );
    let timeout = t["Resources"]["InterruptionFunction"]["Properties"]["Timeout"]
        .as_u64()
        .unwrap();
    assert!(
        visibility >= 6 * timeout,
        "visibility {visibility}s < 6 x the function's {timeout}s"
    );
    assert!(
        retention <= 1200,
        "interruption messages are short-lived: {retention}s"
    );
    let policy =
        resolve(&t["Resources"]["InterruptionQueuePolicy"]["Properties"]["PolicyDocument"]);
    let statements = policy["Statement"].as_array().unwrap();
    let allowed: Vec<&Json> = statements
        .iter()
        .filter(|s| s["Effect"] == "Allow")
        .collect();
    for s in &allowed {
        let mut services = list(&s["Principal"]["Service"]);
        services.sort();
        assert_eq!(services, ["events.amazonaws.com", "sqs.amazonaws.com"]);
    }
    assert!(
        statements
            .iter()
            .any(|s| s["Effect"] == "Deny"
                && s["Condition"]["Bool"]["aws:SecureTransport"] == "false")
    );
}

#[test]
fn functions_are_wired_as_the_runtime_expects() {
    let t = template();
    let f = |name: &str| &t["Resources"][name]["Properties"];
    assert_eq!(f("TickFunction")["ReservedConcurrentExecutions"], 1);
    // Spot handling has capacity of its own, and the public webhook has a ceiling, so a flood
    // of webhook calls cannot starve interruption handling.
    let reserved = |name: &str| f(name)["ReservedConcurrentExecutions"].as_u64();
    assert!(reserved("InterruptionFunction").is_some_and(|n| n >= 2));
    assert!(reserved("WebhookFunction").is_some_and(|n| (1..=20).contains(&n)));
    assert_eq!(
        resolve(&f("TickFunction")["DeadLetterQueue"]["TargetArn"]),
        json!({"GetAtt": "TickDeadLetterQueue.Arn"})
    );
    assert_eq!(
        f("TickFunction")["Events"]["Schedule"]["Properties"]["Schedule"],
        "rate(1 minute)"
    );
    let nudge = resolve(&f("TickFunction")["Events"]["Nudge"]["Properties"]["Pattern"]);
    assert_eq!(nudge["source"], json!(["fleetwright"]));
    assert_eq!(
        nudge["detail-type"],
        json!(["Pending Pod", "Node Joined", "Capacity Needed"])
    );
    let queue = &f("InterruptionFunction")["Events"]["Queue"]["Properties"];
    assert_eq!(queue["BatchSize"], 10);
    assert_eq!(
        queue["FunctionResponseTypes"],
        Value::from(vec!["ReportBatchItemFailures"])
    );
    assert_eq!(
        f("WebhookFunction")["FunctionUrlConfig"]["AuthType"],
        "NONE"
    );
    for (name, r) in of_type(&t, "AWS::Serverless::Function") {
        assert_eq!(r["Metadata"]["BuildMethod"], "rust-cargolambda", "{name}");
    }
    let globals = &t["Globals"]["Function"];
    assert_eq!(globals["Runtime"], "provided.al2023");
    assert_eq!(globals["LoggingConfig"]["LogFormat"], "JSON");
}

#[test]
fn every_environment_variable_is_a_setting_the_functions_accept() {
    let t = template();
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let mut add = |vars: &Value| {
        for (k, v) in vars.as_mapping().into_iter().flatten() {
            let value = match resolve(v) {
                Json::String(s) => s,
                Json::Object(o) if o.contains_key("Ref") => match o["Ref"].as_str() {
                    Some("ClusterName") => CLUSTER.to_string(),
                    Some("WebhookTokenParameter") => "/fleetwright/webhook-token".to_string(),
                    Some(
                        "DryRun"
                        | "NodeRepair"
                        | "LegacyNodeRepair"
                        | "RebootForRepair"
                        | "NodeClassCEL"
                        | "TerminateFirstDrift"
                        | "TerminateFirstRepair"
                        | "SpotToSpotConsolidation",
                    ) => "false".to_string(),
                    Some("FollowUps") => "true".to_string(),
                    Some("TickFollowUpQueue") => {
                        "https://sqs.us-east-1.amazonaws.com/123456789012/q".to_string()
                    }
                    Some("Namespace") => "karpenter".to_string(),
                    Some("ClusterCABundle" | "SchedulerConfig") => String::new(),
                    other => panic!("unexpected parameter {other:?}"),
                },
                other => panic!("{k:?}: {other}"),
            };
            env.insert(k.as_str().unwrap().to_string(), value);
        }
    };
    add(&t["Globals"]["Function"]["Environment"]["Variables"]);
    for (_, r) in of_type(&t, "AWS::Serverless::Function") {
        add(&r["Properties"]["Environment"]["Variables"]);
    }
    assert!(env.keys().all(|k| k.starts_with("FLEETWRIGHT_")));
    let settings =
        fleetwright_runtime::settings::Settings::from_lookup(|k| env.get(k).cloned()).unwrap();
    assert_eq!(settings.cluster_name, CLUSTER);
    // The token is not in the environment: only the name of its SecureString is.
    assert_eq!(settings.webhook_token, None);
    assert_eq!(
        settings.webhook_token_parameter.as_deref(),
        Some("/fleetwright/webhook-token")
    );
}

/// The text of every source file of the AWS adapter (`shared/aws/src`, its folders included).
fn adapter_sources() -> Vec<String> {
    let mut dirs = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/aws/src"
    ))];
    let mut out = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(std::fs::read_to_string(path).unwrap());
            }
        }
    }
    out
}

/// Every AWS operation the adapter calls (`shared/aws/src`) is allowed by some statement of the
/// template: an operation added to the code without its IAM action fails here, not in a user's
/// account with AccessDenied.
#[test]
fn every_aws_operation_the_adapter_calls_is_allowed_by_the_template() {
    let allowed: Vec<String> = statements(&template())
        .iter()
        .filter(|s| s["Effect"] == "Allow")
        .flat_map(actions)
        .collect();
    let mut called = std::collections::BTreeSet::new();
    for text in adapter_sources() {
        called.extend(operations(&text));
    }
    assert!(called.len() >= 15, "{called:?}");
    for op in &called {
        let action = iam_action(op);
        assert!(
            allowed.iter().any(|a| a == &action),
            "the adapter calls {op}, but no statement of infra/template.yaml allows {action}"
        );
    }
}

/// `ec2:DeleteLaunchTemplate` is granted because the adapter calls it (launch-template garbage
/// collection), and only on templates carrying this cluster's and a nodepool's tags, which the
/// code checks too.
#[test]
fn launch_templates_are_deleted_by_the_adapter_and_only_when_tagged_for_the_cluster() {
    let called: Vec<String> = adapter_sources()
        .iter()
        .flat_map(|text| operations(text))
        .collect();
    assert!(called.iter().any(|op| op == "delete_launch_template"));
    let deleting: Vec<Json> = statements(&template())
        .into_iter()
        .filter(|s| actions(s).iter().any(|a| a == "ec2:DeleteLaunchTemplate"))
        .collect();
    assert_eq!(deleting.len(), 1);
    let c = &deleting[0]["Condition"];
    assert_eq!(
        c["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/dev"],
        "owned"
    );
    assert_eq!(
        c["StringLike"]["aws:ResourceTag/karpenter.sh/nodepool"],
        "*"
    );
}

/// Getters of SDK types whose names start like an operation's.
const GETTERS: [&str; 1] = ["create_time"];

/// The SDK operations called in `text`: `.describe_subnets()`, `.create_fleet()`, ...
fn operations(text: &str) -> Vec<String> {
    const VERBS: [&str; 8] = [
        "describe_",
        "create_",
        "delete_",
        "terminate_",
        "run_",
        "get_",
        "put_",
        "add_",
    ];
    text.match_indices('.')
        .filter_map(|(i, _)| {
            let rest = &text[i + 1..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            let call = rest[name.len()..].starts_with("()");
            let operation =
                VERBS.iter().any(|v| name.starts_with(v)) && !GETTERS.contains(&name.as_str());
            (call && operation).then_some(name)
        })
        .collect()
}

/// The IAM action of an SDK operation: its service's prefix and its name in PascalCase.
fn iam_action(op: &str) -> String {
    let service = match op {
        "describe_cluster" => "eks",
        "get_parameter" | "get_parameters" => "ssm",
        "put_events" => "events",
        "get_products" => "pricing",
        "create_instance_profile" | "get_instance_profile" | "add_role_to_instance_profile" => {
            "iam"
        }
        _ if op.starts_with("describe_")
            || [
                "create_fleet",
                "create_launch_template",
                "delete_launch_template",
                "terminate_instances",
                "run_instances",
            ]
            .contains(&op) =>
        {
            "ec2"
        }
        other => panic!("which service does {other} call? Add it here."),
    };
    let pascal: String = op
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect();
    format!("{service}:{pascal}")
}
