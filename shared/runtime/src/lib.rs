//! fleetwright-runtime: the use cases behind the three Lambda functions. Each reads the truth
//! (Kubernetes API, EC2), asks the core what to do, and applies it through the adapters:
//! [`tick::Tick`], [`interruption::Interruption`] and [`webhook::Webhook`]. Settings come from the
//! environment once per container ([`settings::Settings`]). The adapters arrive through the
//! ports (`fleetwright_cloud::Cloud`, [`nudge::Nudge`], a `kube::Client`); the functions' wiring
//! (`fleetwright-connect`) builds them, so nothing here depends on the AWS SDK.

pub mod deadline;
pub mod error;
pub mod interruption;
pub mod metrics;
pub mod nudge;
pub mod settings;
pub mod shadow;
pub mod tick;
pub mod webhook;
pub mod world;

pub use error::RuntimeError;
pub use settings::Settings;
