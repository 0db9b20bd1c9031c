//! fleetwright-aws: the only part of Fleetwright that talks to AWS. Live catalog and spot prices,
//! EC2NodeClass discovery (subnets, security groups, AMIs, instance profiles), launch templates
//! and user data, CreateFleet, guarded termination, the EventBridge nudge and the tick's delayed
//! follow-ups, implementing the cloud port ([`fleetwright_cloud::Cloud`]) as [`Ec2Cloud`].

pub mod catalog;
pub mod clients;
pub mod cloud;
pub mod cluster;
pub mod error;
pub mod fleet;
pub mod follow_up;
pub mod instance_profile;
pub mod instances;
pub mod launch_template;
pub mod nodeclass;
pub mod nudge;
pub mod pricing;
pub mod secret;
pub mod template_gc;
pub mod userdata;

pub use clients::AwsClients;
pub use cloud::Ec2Cloud;
pub use error::AwsError;
pub use fleet::{LaunchRequest, Launched};
pub use fleetwright_cloud::{ami, unavailable, Cloud};
