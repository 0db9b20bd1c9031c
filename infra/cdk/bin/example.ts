// An example app: Fleetwright for an existing EKS cluster, in its own stack.
//
//   cargo lambda build --release --arm64          # the three bootstrap binaries
//   cd infra/cdk && npm ci && npx cdk deploy -c clusterName=my-cluster
//
// Context: clusterName (required), codeDirectory (default ../../target/lambda), and for a
// private cluster vpcId, securityGroupId and createVpcEndpoints=true.

import { Annotations, App, CfnOutput, Stack } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Fleetwright } from '../lib';

const app = new App();
const clusterName = app.node.tryGetContext('clusterName');
if (!clusterName) {
  throw new Error('give the cluster: cdk synth -c clusterName=my-cluster');
}
const stack = new Stack(app, `Fleetwright-${clusterName}`, {
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
});
const vpcId = app.node.tryGetContext('vpcId');
const vpc = vpcId
  ? ec2.Vpc.fromVpcAttributes(stack, 'Vpc', {
      vpcId,
      availabilityZones: (app.node.tryGetContext('availabilityZones') ?? 'us-east-1a,us-east-1b').split(','),
      privateSubnetIds: (app.node.tryGetContext('privateSubnetIds') ?? '').split(',').filter(Boolean),
    })
  : undefined;
if (vpc) {
  // Fleetwright only places its functions in these subnets; it reads no route table.
  Annotations.of(stack).acknowledgeWarning('@aws-cdk/aws-ec2:noSubnetRouteTableId', 'no route table is read');
}
const securityGroups = vpc
  ? [ec2.SecurityGroup.fromSecurityGroupId(stack, 'FunctionsSecurityGroup', app.node.tryGetContext('securityGroupId'))]
  : undefined;
const fleetwright = new Fleetwright(stack, 'Fleetwright', {
  clusterName,
  codeDirectory: app.node.tryGetContext('codeDirectory'),
  vpc,
  securityGroups,
  createVpcEndpoints: app.node.tryGetContext('createVpcEndpoints') === 'true',
});
new CfnOutput(stack, 'WebhookFunctionUrl', { value: fleetwright.webhookUrl.url });
new CfnOutput(stack, 'NodeRoleName', { value: fleetwright.nodeRole.roleName });
new CfnOutput(stack, 'InterruptionQueueUrl', { value: fleetwright.interruptionQueue.queueUrl });
new CfnOutput(stack, 'DashboardName', { value: fleetwright.observability.dashboard.dashboardName });
