use super::*;

#[test]
fn al2023_latest_names_six_parameters() {
    let (family, params) = alias_parameters("al2023@latest", "1.32").unwrap();
    assert_eq!(family, AmiFamily::AL2023);
    assert_eq!(params.len(), 6);
    assert_eq!(
            params[0].path,
            "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"
        );
    assert!(params
        .iter()
        .any(|p| p.arch == "arm64" && p.variant == Variant::Nvidia));
}

#[test]
fn pinned_versions_name_the_release() {
    let (_, al2023) = alias_parameters("al2023@v20240807", "1.30").unwrap();
    assert_eq!(al2023[0].path, "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.30-v20240807/image_id");
    let (_, br) = alias_parameters("bottlerocket@v1.20.3", "1.30").unwrap();
    assert_eq!(
        br[0].path,
        "/aws/service/bottlerocket/aws-k8s-1.30/x86_64/1.20.3/image_id"
    );
    assert_eq!(
        br[1].path,
        "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/x86_64/1.20.3/image_id"
    );
    let (_, al2) = alias_parameters("al2@latest", "1.29").unwrap();
    assert_eq!(
        al2[1].path,
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-arm64/recommended/image_id"
    );
    assert_eq!(
        al2[2].path,
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-gpu/recommended/image_id"
    );
}

#[test]
fn bad_aliases_are_explained() {
    assert!(alias_parameters("al2023", "1.32")
        .unwrap_err()
        .contains("family@version"));
    assert!(alias_parameters("windows2022@latest", "1.32")
        .unwrap_err()
        .contains("family"));
    assert!(alias_parameters("al2023@20240807", "1.32")
        .unwrap_err()
        .contains("`v`"));
}

#[test]
fn picks_the_newest_matching_ami() {
    let ami = |id: &str, arch: &str, variant, created: &str| Ami {
        id: id.into(),
        arch: arch.into(),
        variant,
        created: Some(created.into()),
    };
    let amis = vec![
        ami("ami-old", "amd64", Some(Variant::Standard), "2024-01-01"),
        ami("ami-new", "amd64", Some(Variant::Standard), "2024-06-01"),
        ami("ami-gpu", "amd64", Some(Variant::Nvidia), "2024-06-01"),
        ami("ami-arm", "arm64", None, "2024-02-01"),
    ];
    assert_eq!(
        pick(&amis, "amd64", Variant::Standard).unwrap().id,
        "ami-new"
    );
    assert_eq!(pick(&amis, "amd64", Variant::Nvidia).unwrap().id, "ami-gpu");
    assert_eq!(pick(&amis, "arm64", Variant::Nvidia).unwrap().id, "ami-arm");
    assert!(pick(&amis, "amd64", Variant::Neuron).is_none());
}
