//! Objects a read or a conversion left out, each with its error. The reader and the conversion
//! both reject objects, and the tick reports them all, so the record belongs to neither.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// An object a read or a conversion left out, and why: the error names the object and the
/// field. The tick reports each (a condition where the kind has one, and an Event) and goes on
/// with every other object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rejected {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    pub error: String,
    /// The object is still read, and only the part the error names fails closed (a budget
    /// schedule no parser reads allows no disruption): reported as the others are, but not
    /// left out, and no condition of its kind turns False for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
}

impl Rejected {
    pub fn new(kind: &str, meta: &ObjectMeta, error: impl std::fmt::Display) -> Rejected {
        Rejected {
            kind: kind.to_string(),
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            error: error.to_string(),
            kept: false,
        }
    }

    /// `NodePool default`, `Pod shop/web-0`.
    pub fn object(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}
