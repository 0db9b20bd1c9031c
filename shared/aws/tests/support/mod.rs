//! Test support for the AWS adapter: SDK configuration pointed at the local moto server that
//! `scripts/test.sh` starts, a fault injector that sits in the SDK's HTTP client and answers chosen
//! API actions itself (passing everything else to moto), and a fixture that creates a tagged VPC,
//! subnets, a security group and the EKS AMI parameters for one test cluster.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use fleetwright_aws::clients::retry_config;
use fleetwright_aws::cluster::ClusterInfo;
use fleetwright_aws::AwsClients;
use fleetwright_crds::EC2NodeClass;

pub const REGION: &str = "us-east-1";
/// moto reserves `/aws/`, so the tests mirror the EKS public parameters under this root.
pub const PARAMETER_ROOT: &str = "/mirror";

/// The moto endpoint `scripts/test.sh` started.
pub fn moto_endpoint() -> String {
    let url = std::env::var("FLEETWRIGHT_MOTO_ENDPOINT").expect(
        "FLEETWRIGHT_MOTO_ENDPOINT is not set: run the suite with scripts/test.sh, which starts moto",
    );
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "tests only ever talk to 127.0.0.1, not {url}"
    );
    url
}

/// SDK configuration for moto: dummy credentials, fast retries, optionally a custom HTTP client.
pub fn sdk_config(http: Option<SharedHttpClient>) -> SdkConfig {
    let mut builder = SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .endpoint_url(moto_endpoint())
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(Credentials::new(
                "testing", "testing", None, None, "tests",
            )),
        )
        .retry_config(retry_config(Duration::from_millis(1)))
        .sleep_impl(aws_smithy_async::rt::sleep::default_async_sleep().expect("tokio sleep"))
        .time_source(aws_smithy_async::time::SystemTimeSource::new());
    builder.set_http_client(Some(
        http.unwrap_or_else(|| aws_smithy_http_client::Builder::new().build_http()),
    ));
    builder.build()
}

pub fn clients() -> AwsClients {
    AwsClients::new(&sdk_config(None))
}

/// One instance as DescribeInstances returns it.
pub async fn describe_instance(
    ec2: &aws_sdk_ec2::Client,
    id: &str,
) -> aws_sdk_ec2::types::Instance {
    let out = ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .expect("DescribeInstances");
    out.reservations()[0].instances()[0].clone()
}

// ---- fault injection ----

/// An answer the injector gives instead of moto.
#[derive(Clone, Debug)]
pub struct Fault {
    pub action: String,
    pub status: u16,
    pub body: String,
    /// How many more times to answer; then requests pass through again.
    pub times: usize,
}

/// An HTTP client that answers listed actions itself and passes the rest to moto, recording the
/// action and body of every request.
#[derive(Clone, Debug, Default)]
pub struct FaultInjector {
    faults: Arc<Mutex<Vec<Fault>>>,
    pub seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl FaultInjector {
    pub fn inject(&self, action: &str, status: u16, body: &str, times: usize) {
        self.faults.lock().unwrap().push(Fault {
            action: action.into(),
            status,
            body: body.into(),
            times,
        });
    }

    /// The bodies of the requests made for an action.
    pub fn requests(&self, action: &str) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(a, _)| a == action)
            .map(|(_, b)| b.clone())
            .collect()
    }

    pub fn client(&self) -> SharedHttpClient {
        SharedHttpClient::new(self.clone())
    }
}

impl HttpClient for FaultInjector {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        let inner = aws_smithy_http_client::Builder::new()
            .build_http()
            .http_connector(settings, components);
        SharedHttpConnector::new(FaultConnector {
            inner,
            injector: self.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultConnector {
    inner: SharedHttpConnector,
    injector: FaultInjector,
}

/// The API action of a request: `Action=` in a query-protocol body, or the JSON target header.
fn action_of(request: &HttpRequest) -> (String, String) {
    let body = request
        .body()
        .bytes()
        .map(|b| String::from_utf8_lossy(b).to_string())
        .unwrap_or_default();
    let from_body = body
        .split('&')
        .find_map(|kv| kv.strip_prefix("Action="))
        .map(str::to_string);
    let from_header = request
        .headers()
        .get("x-amz-target")
        .and_then(|t| t.rsplit('.').next())
        .map(str::to_string);
    (from_body.or(from_header).unwrap_or_default(), body)
}

impl HttpConnector for FaultConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let (action, body) = action_of(&request);
        self.injector
            .seen
            .lock()
            .unwrap()
            .push((action.clone(), body));
        let mut faults = self.injector.faults.lock().unwrap();
        if let Some(fault) = faults
            .iter_mut()
            .find(|f| f.action == action && f.times > 0)
        {
            fault.times -= 1;
            let status = StatusCode::try_from(fault.status).expect("a valid status");
            let response = Response::new(status, SdkBody::from(fault.body.clone()));
            return HttpConnectorFuture::ready(Ok(response));
        }
        drop(faults);
        self.inner.call(request)
    }
}

/// EC2's error document.
pub fn ec2_error(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>req-1</RequestID></Response>"
    )
}

// ---- fixture ----

/// A cluster's network and AMIs in moto.
#[derive(Debug)]
pub struct Fixture {
    pub cluster: String,
    pub vpc: String,
    pub subnets: BTreeMap<String, String>,
    pub security_group: String,
    pub amis: BTreeMap<&'static str, String>,
    /// A Kubernetes version of this fixture's own, so parallel tests' SSM parameters never collide.
    pub k8s: String,
}

pub fn tag_spec(resource: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(
            tags.iter()
                .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
                .collect(),
        ))
        .build()
}

impl Fixture {
    /// A VPC with two subnets tagged `karpenter.sh/discovery=<cluster>` (us-east-1a, us-east-1b),
    /// one untagged subnet, a tagged security group, and AL2023 alias parameters in SSM.
    pub async fn new(clients: &AwsClients, cluster: &str) -> Fixture {
        let ec2 = &clients.ec2;
        let discovery = [("karpenter.sh/discovery", cluster)];
        let vpc = ec2
            .create_vpc()
            .cidr_block("10.20.0.0/16")
            .send()
            .await
            .expect("CreateVpc")
            .vpc()
            .and_then(|v| v.vpc_id())
            .unwrap()
            .to_string();
        let mut subnets = BTreeMap::new();
        for (i, zone) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
            let id = ec2
                .create_subnet()
                .vpc_id(&vpc)
                .availability_zone(*zone)
                .cidr_block(format!("10.20.{i}.0/24"))
                .tag_specifications(tag_spec(ResourceType::Subnet, &discovery))
                .send()
                .await
                .expect("CreateSubnet")
                .subnet()
                .and_then(|s| s.subnet_id())
                .unwrap()
                .to_string();
            subnets.insert(zone.to_string(), id);
        }
        ec2.create_subnet()
            .vpc_id(&vpc)
            .availability_zone("us-east-1c")
            .cidr_block("10.20.9.0/24")
            .send()
            .await
            .expect("CreateSubnet (untagged)");
        let security_group = ec2
            .create_security_group()
            .group_name(format!("{cluster}-nodes"))
            .description("nodes")
            .vpc_id(&vpc)
            .tag_specifications(tag_spec(ResourceType::SecurityGroup, &discovery))
            .send()
            .await
            .expect("CreateSecurityGroup")
            .group_id()
            .unwrap()
            .to_string();
        let k8s = format!("1.{}", 100 + fxhash(cluster) % 100_000);
        let amis = put_al2023_parameters(clients, cluster, &k8s).await;
        Fixture {
            cluster: cluster.to_string(),
            vpc,
            subnets,
            security_group,
            amis,
            k8s,
        }
    }

    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            name: self.cluster.clone(),
            endpoint: "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com".into(),
            certificate_authority: "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==".into(),
            service_cidr: "10.100.0.0/16".into(),
            kubernetes_version: self.k8s.clone(),
        }
    }

    /// An EC2NodeClass selecting this fixture's subnets and security group by tag.
    pub fn nodeclass(&self, name: &str) -> EC2NodeClass {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": name},
            "spec": {
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": self.cluster}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": self.cluster}}],
                "instanceProfile": "KarpenterNodeInstanceProfile",
                "tags": {"team": "platform"}
            }
        }))
        .expect("a valid EC2NodeClass")
    }
}

/// Puts the AL2023 `recommended/image_id` parameters (x86_64 and arm64 standard, x86_64 nvidia)
/// that EKS publishes, under the fixture's own Kubernetes version.
async fn put_al2023_parameters(
    clients: &AwsClients,
    cluster: &str,
    k8s: &str,
) -> BTreeMap<&'static str, String> {
    let mut amis = BTreeMap::new();
    for (arch, variant, key) in [
        ("x86_64", "standard", "amd64"),
        ("arm64", "standard", "arm64"),
        ("x86_64", "nvidia", "amd64-nvidia"),
    ] {
        let id = format!(
            "ami-{:0>17}",
            format!("{:x}", fxhash(&format!("{cluster}{key}")))
        );
        let id: String = id.chars().take(21).collect();
        clients
            .ssm
            .put_parameter()
            .name(format!(
                "{PARAMETER_ROOT}/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}/recommended/image_id"
            ))
            .value(&id)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .overwrite(true)
            .send()
            .await
            .expect("PutParameter");
        amis.insert(key, id);
    }
    amis
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}
