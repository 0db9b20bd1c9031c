//! AMI families and aliases. `amiSelectorTerms[].alias` (`al2023@latest`, `al2@v20240807`,
//! `bottlerocket@v1.20.3`) names SSM public parameters per architecture and variant; this module
//! turns an alias into those parameter paths (pure) and picks the AMI for an instance type.

use serde::{Deserialize, Serialize};

/// The AMI families Fleetwright writes user data for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AmiFamily {
    AL2023,
    AL2,
    Bottlerocket,
    /// User data is passed through as written.
    Custom,
}

impl AmiFamily {
    /// Parses `spec.amiFamily` or an alias's family.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text.to_ascii_lowercase().as_str() {
            "al2023" => AmiFamily::AL2023,
            "al2" => AmiFamily::AL2,
            "bottlerocket" => AmiFamily::Bottlerocket,
            "custom" => AmiFamily::Custom,
            _ => return None,
        })
    }
}

/// Which accelerators an AMI is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Variant {
    Standard,
    Nvidia,
    Neuron,
}

/// A resolved AMI.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ami {
    pub id: String,
    /// Kubernetes architecture: `amd64` or `arm64`.
    pub arch: String,
    /// None for AMIs selected by id, name or tags: they serve every type of their architecture.
    pub variant: Option<Variant>,
    /// Creation date (ISO 8601) when known; newer AMIs are preferred.
    pub created: Option<String>,
}

/// One SSM parameter an alias resolves through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AliasParameter {
    pub path: String,
    pub arch: &'static str,
    pub variant: Variant,
}

const ARCHES: [(&str, &str); 2] = [("x86_64", "amd64"), ("arm64", "arm64")];

/// The SSM parameters behind an alias, for Kubernetes version `k8s` (`1.32`).
pub fn alias_parameters(
    alias: &str,
    k8s: &str,
) -> Result<(AmiFamily, Vec<AliasParameter>), String> {
    let (family, version) = alias
        .split_once('@')
        .ok_or_else(|| format!("alias {alias:?} must be family@version, e.g. al2023@latest"))?;
    let family = match AmiFamily::parse(family) {
        Some(f @ (AmiFamily::AL2023 | AmiFamily::AL2 | AmiFamily::Bottlerocket)) => f,
        _ => {
            return Err(format!(
                "alias {alias:?}: family must be al2023, al2 or bottlerocket"
            ))
        }
    };
    if version != "latest" && !version.starts_with('v') {
        return Err(format!(
            "alias {alias:?}: version must be `latest` or start with `v`"
        ));
    }
    let params = match family {
        AmiFamily::AL2023 => al2023_parameters(version, k8s),
        AmiFamily::AL2 => al2_parameters(version, k8s),
        _ => bottlerocket_parameters(version, k8s),
    };
    Ok((family, params))
}

fn al2023_parameters(version: &str, k8s: &str) -> Vec<AliasParameter> {
    let mut out = Vec::new();
    for (aws_arch, arch) in ARCHES {
        for (name, variant) in [
            ("standard", Variant::Standard),
            ("nvidia", Variant::Nvidia),
            ("neuron", Variant::Neuron),
        ] {
            let base =
                format!("/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{aws_arch}/{name}");
            let path = if version == "latest" {
                format!("{base}/recommended/image_id")
            } else {
                format!("{base}/amazon-eks-node-al2023-{aws_arch}-{name}-{k8s}-{version}/image_id")
            };
            out.push(AliasParameter {
                path,
                arch,
                variant,
            });
        }
    }
    out
}

fn al2_parameters(version: &str, k8s: &str) -> Vec<AliasParameter> {
    let flavours = [
        (
            "amazon-linux-2",
            "amazon-eks-node",
            "amd64",
            Variant::Standard,
        ),
        (
            "amazon-linux-2-arm64",
            "amazon-eks-arm64-node",
            "arm64",
            Variant::Standard,
        ),
        (
            "amazon-linux-2-gpu",
            "amazon-eks-gpu-node",
            "amd64",
            Variant::Nvidia,
        ),
        (
            "amazon-linux-2-gpu",
            "amazon-eks-gpu-node",
            "amd64",
            Variant::Neuron,
        ),
    ];
    flavours
        .into_iter()
        .map(|(dir, image, arch, variant)| {
            let base = format!("/aws/service/eks/optimized-ami/{k8s}/{dir}");
            let path = if version == "latest" {
                format!("{base}/recommended/image_id")
            } else {
                format!("{base}/{image}-{k8s}-{version}/image_id")
            };
            AliasParameter {
                path,
                arch,
                variant,
            }
        })
        .collect()
}

fn bottlerocket_parameters(version: &str, k8s: &str) -> Vec<AliasParameter> {
    let version = if version == "latest" {
        "latest"
    } else {
        version.trim_start_matches('v')
    };
    let mut out = Vec::new();
    for (aws_arch, arch) in ARCHES {
        for (suffix, variant) in [("", Variant::Standard), ("-nvidia", Variant::Nvidia)] {
            out.push(AliasParameter {
                path: format!(
                    "/aws/service/bottlerocket/aws-k8s-{k8s}{suffix}/{aws_arch}/{version}/image_id"
                ),
                arch,
                variant,
            });
        }
    }
    out
}

/// The newest AMI for an architecture and variant. AMIs without a variant match any variant.
pub fn pick<'a>(amis: &'a [Ami], arch: &str, variant: Variant) -> Option<&'a Ami> {
    amis.iter()
        .filter(|a| a.arch == arch && a.variant.is_none_or(|v| v == variant))
        .max_by(|a, b| a.created.cmp(&b.created).then_with(|| b.id.cmp(&a.id)))
}

#[cfg(test)]
#[path = "../tests/unit/ami.rs"]
mod tests;
