//! Kubelet expressions compiled, evaluated and resolved on real instance types of the embedded
//! catalog.

use std::collections::BTreeMap;

use super::*;
use crate::catalog::{Catalog, NodeClassSettings};

fn raw(name: &str) -> &'static RawInstanceType {
    Catalog::embedded()
        .raw
        .iter()
        .find(|r| r.instance_type == name)
        .unwrap_or_else(|| panic!("{name} is in the embedded catalog"))
}

fn max_pods(expression: &str) -> KubeletSettings {
    KubeletSettings {
        expressions: KubeletExpressions::read(Some(expression), None, None).unwrap(),
        ..Default::default()
    }
}

fn eval(expression: &str, name: &str) -> Result<i64, String> {
    let raw = raw(name);
    let vars = ExpressionVars::of(raw, default_pods(raw, &KubeletSettings::default()));
    Expression::compile(expression)?.evaluate(&vars)
}

fn compile_error(expression: &str) -> String {
    Expression::compile(expression).unwrap_err()
}

#[test]
fn m5_large_is_seen_as_karpenter_sees_it() {
    let raw = raw("m5.large");
    let vars = ExpressionVars::of(raw, default_pods(raw, &KubeletSettings::default()));
    assert_eq!(
        vars,
        ExpressionVars {
            vcpus: 2,
            memory_mib: 8192,
            default_enis: 3,
            ips_per_eni: 10,
            max_pods: 29,
            instance_type: "m5.large".into(),
        }
    );
}

#[test]
fn expressions_evaluate_per_instance_type() {
    assert_eq!(eval("min(vcpus * 8, 110)", "m5.large"), Ok(16));
    assert_eq!(eval("min(vcpus * 8, 110)", "m5.4xlarge"), Ok(110));
    assert_eq!(eval("max_pods - 4", "m5.large"), Ok(25));
    assert_eq!(
        eval("default_enis * (ips_per_eni - 1) + 2", "m5.large"),
        Ok(29)
    );
    assert_eq!(eval("memory_mib / 1024", "m5.large"), Ok(8));
    assert_eq!(
        eval("instance_type.startsWith('m5') ? 20 : 10", "m5.large"),
        Ok(20)
    );
    assert_eq!(
        eval("instance_type in ['c5.large'] ? 20 : 10", "m5.large"),
        Ok(10)
    );
}

#[test]
fn a_double_result_is_truncated_and_mixed_min_max_are_doubles() {
    // 2 × 2.9 = 5.8, taken as Go's int64 conversion takes it.
    assert_eq!(eval("double(vcpus) * 2.9", "m5.large"), Ok(5));
    assert_eq!(eval("max(vcpus, 2.5)", "m5.large"), Ok(2));
    assert_eq!(eval("min(vcpus, 7.9) * 2.0", "m5.4xlarge"), Ok(15));
    assert_eq!(eval("-0.5", "m5.large"), Ok(0));
}

#[test]
fn compile_errors_are_karpenters() {
    assert!(compile_error("vcpus * 1.5")
        .contains("no matching overload for '_*_' applied to '(int, double)'"));
    assert!(compile_error("cores * 8").contains("undeclared reference to 'cores'"));
    assert!(compile_error("instance_type").contains("must return int or double"));
    assert!(compile_error("vcpus > 2").contains("must return int or double"));
    assert!(compile_error("vcpus > 2 ? 10 : 2.5").contains("_?_:_"));
    assert!(compile_error("min(vcpus, 8, 110)").contains("'min'"));
    assert!(compile_error("(vcpus").contains("Syntax error"));
    assert!(compile_error("vcpus > 4 ? vcpus * 1.5 : 10").contains("'_*_'"));
}

#[test]
fn evaluation_errors_are_errors() {
    assert!(eval("memory_mib / (vcpus - 2)", "m5.large")
        .unwrap_err()
        .to_lowercase()
        .contains("division by zero"));
    assert!(eval("9223372036854775807 + vcpus", "m5.large").is_err());
    assert!(eval("1.0 / (double(vcpus) - 2.0)", "m5.large")
        .unwrap_err()
        .contains("non-finite"));
}

#[test]
fn reservations_round_up_as_karpenter_writes_them() {
    assert_eq!(reserved_quantity("cpu", 14), "20m");
    assert_eq!(reserved_quantity("cpu", 480), "480m");
    assert_eq!(reserved_quantity("memory", 81), "96Mi");
    assert_eq!(reserved_quantity("memory", 0), "0Mi");
    assert_eq!(reserved_quantity("ephemeral-storage", 3), "3Gi");
    assert_eq!(reserved_quantity("pid", 200), "200");
    assert_eq!(
        reserved_quantity("cpu", i64::MAX - 3),
        format!("{}m", i64::MAX - 3)
    );
}

#[test]
fn a_max_pods_expression_sets_each_types_pod_capacity() {
    let settings = NodeClassSettings {
        kubelet: max_pods("min(vcpus * 8, 110)"),
        ..Default::default()
    };
    let types = Catalog::embedded().instance_types(&settings);
    let pods = |name: &str| types.iter().find(|t| t.name == name).unwrap().capacity.pods;
    assert_eq!(pods("m5.large"), 16);
    assert_eq!(pods("m5.xlarge"), 32);
    assert_eq!(pods("m5.4xlarge"), 110);
}

#[test]
fn pods_per_core_still_caps_an_evaluated_max_pods() {
    let mut kubelet = max_pods("110");
    kubelet.pods_per_core = Some(4);
    let resolved = resolve_kubelet(raw("m5.large"), &kubelet, true).unwrap();
    assert_eq!((resolved.pods, resolved.max_pods), (8, Some(110)));
}

#[test]
fn reservation_expressions_see_the_resolved_max_pods() {
    let reserved: BTreeMap<String, String> = [
        ("memory".to_string(), "11 * max_pods + 255".to_string()),
        ("cpu".to_string(), "vcpus * 7".to_string()),
    ]
    .into();
    let kubelet = KubeletSettings {
        expressions: KubeletExpressions::read(Some("min(vcpus * 8, 110)"), Some(&reserved), None)
            .unwrap(),
        ..Default::default()
    };
    let resolved = resolve_kubelet(raw("m5.large"), &kubelet, true).unwrap();
    // 11 × 16 + 255 = 431 MiB, rounded up to 432; 14m rounded up to 20m.
    assert_eq!(resolved.kube_reserved["memory"], "432Mi");
    assert_eq!(resolved.kube_reserved["cpu"], "20m");
    let settings = NodeClassSettings {
        kubelet,
        ..Default::default()
    };
    let m5 = Catalog::embedded()
        .instance_types(&settings)
        .into_iter()
        .find(|t| t.name == "m5.large")
        .unwrap();
    let default = Catalog::embedded()
        .instance_types(&NodeClassSettings::default())
        .into_iter()
        .find(|t| t.name == "m5.large")
        .unwrap();
    assert_eq!(m5.overhead.cpu, 20);
    assert_eq!(
        m5.overhead.memory - default.overhead.memory,
        (432 - (11 * 29 + 255)) << 20
    );
}

#[test]
fn quantities_are_not_expressions_and_reserved_resources_are_checked() {
    let map = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
    let read = KubeletExpressions::read(None, Some(&map("cpu", "100m")), None).unwrap();
    assert!(read.is_empty());
    let err = KubeletExpressions::read(None, Some(&map("gpu", "vcpus")), None).unwrap_err();
    assert_eq!(err.field, "spec.kubelet.kubeReserved.gpu");
    let err = KubeletExpressions::read(None, None, Some(&map("memory", "vcpus *"))).unwrap_err();
    assert_eq!(err.field, "spec.kubelet.systemReserved.memory");
    assert!(err.reason.starts_with("invalid CEL expression \"vcpus *\""));
}

#[test]
fn an_expression_failing_for_one_type_fails_the_class_and_is_named() {
    let kubelet = max_pods("memory_mib / (vcpus - 2)");
    let err = Catalog::embedded().check_kubelet(&kubelet).unwrap_err();
    assert_eq!(err.field, "spec.kubelet.maxPods");
    let failed = raw(err.instance_type.as_deref().unwrap());
    assert_eq!(failed.v_cpu_info.default_v_cpus, 2);
    assert!(
        err.reason.to_lowercase().contains("division by zero"),
        "{err}"
    );
    let settings = NodeClassSettings {
        kubelet,
        ..Default::default()
    };
    assert!(Catalog::embedded().instance_types(&settings).is_empty());
}

#[test]
fn max_pods_outside_int32_and_negative_reservations_fail_validation() {
    let err = Catalog::embedded()
        .check_kubelet(&max_pods("vcpus - 3"))
        .unwrap_err();
    assert!(err.reason.contains("outside the valid range"), "{err}");
    let reserved = BTreeMap::from([("cpu".to_string(), "vcpus - 3".to_string())]);
    let kubelet = KubeletSettings {
        expressions: KubeletExpressions::read(None, Some(&reserved), None).unwrap(),
        ..Default::default()
    };
    let err = Catalog::embedded().check_kubelet(&kubelet).unwrap_err();
    assert_eq!(err.field, "spec.kubelet.kubeReserved.cpu");
    // Resolving drops the failing reservation instead: its default holds.
    let resolved = resolve_kubelet(raw("m5.large"), &kubelet, false).unwrap();
    assert!(resolved.kube_reserved.is_empty());
}
