//! What an EC2NodeClass resolves to (subnets, security groups, AMIs, instance profile), as the
//! cloud port hands it to the runtime.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ami::{Ami, AmiFamily};

/// A subnet a node can launch into.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    pub available_ips: i32,
}

/// What an EC2NodeClass resolves to right now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResolvedNodeClass {
    pub name: String,
    pub family: AmiFamily,
    pub subnets: Vec<Subnet>,
    pub security_groups: Vec<String>,
    pub amis: Vec<Ami>,
    pub instance_profile: String,
}

impl ResolvedNodeClass {
    /// The subnet with the most free addresses in each zone.
    pub fn best_subnets(&self) -> BTreeMap<&str, &Subnet> {
        let mut best: BTreeMap<&str, &Subnet> = BTreeMap::new();
        for s in &self.subnets {
            let keep = best
                .get(s.zone.as_str())
                .is_some_and(|b| (b.available_ips, &s.id) >= (s.available_ips, &b.id));
            if !keep {
                best.insert(&s.zone, s);
            }
        }
        best
    }
}

/// Where the AWS public SSM parameters are read from: the public root (`""`) by default, or a
/// mirror such as `/mirror` holding copies under `/mirror/aws/service/...` (for accounts that pin
/// approved AMIs, and for tests, since local AWS emulators reserve `/aws/`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParameterRoot(pub String);
