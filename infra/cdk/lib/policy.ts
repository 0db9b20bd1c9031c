// The controller's least-privilege policy (tick), statement for statement the
// one in infra/template.yaml: modelled on Karpenter's getting-started policy, with every write
// scoped by the cluster's tags. test/equivalence.test.ts keeps the two equal.

import { Fn } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';

/**
 * The statements, as the text of an `Fn::Sub`: `${AWS::Partition}`, `${AWS::Region}` and
 * `${AWS::AccountId}` are CloudFormation's, `${ClusterName}`, `${NodeRoleArn}` and
 * `${TickDeadLetterQueueArn}`, `${TickFollowUpQueueArn}` the variables [controllerDocument] gives.
 * Written as plain strings so that condition keys may name the cluster too (a key cannot be a
 * CDK token).
 */
export function controllerStatements(): iam.PolicyStatement[] {
  const regional = (resource: string) => `arn:\${AWS::Partition}:ec2:\${AWS::Region}:*:${resource}`;
  const owned = { 'aws:ResourceTag/kubernetes.io/cluster/${ClusterName}': 'owned' };
  const taggedOnCreate = ['fleet/*', 'instance/*', 'volume/*', 'network-interface/*', 'launch-template/*', 'spot-instances-request/*'];
  const profile = 'arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/fleetwright_${ClusterName}_*';
  return [
    new iam.PolicyStatement({
      sid: 'AllowScopedEC2InstanceAccessActions',
      resources: [
        'arn:${AWS::Partition}:ec2:${AWS::Region}::image/*',
        'arn:${AWS::Partition}:ec2:${AWS::Region}::snapshot/*',
        regional('security-group/*'),
        regional('subnet/*'),
        regional('capacity-reservation/*'),
      ],
      actions: ['ec2:RunInstances', 'ec2:CreateFleet'],
    }),
    new iam.PolicyStatement({
      sid: 'AllowScopedEC2LaunchTemplateAccessActions',
      resources: [regional('launch-template/*')],
      actions: ['ec2:RunInstances', 'ec2:CreateFleet'],
      conditions: {
        StringEquals: owned,
        StringLike: { 'aws:ResourceTag/karpenter.sh/nodepool': '*' },
      },
    }),
    new iam.PolicyStatement({
      sid: 'AllowScopedEC2InstanceActionsWithTags',
      resources: taggedOnCreate.map(regional),
      actions: ['ec2:RunInstances', 'ec2:CreateFleet', 'ec2:CreateLaunchTemplate'],
      conditions: {
        StringEquals: {
          'aws:RequestTag/kubernetes.io/cluster/${ClusterName}': 'owned',
          'aws:RequestTag/eks:eks-cluster-name': '${ClusterName}',
        },
        StringLike: { 'aws:RequestTag/karpenter.sh/nodepool': '*' },
      },
    }),
    new iam.PolicyStatement({
      sid: 'AllowScopedResourceCreationTagging',
      resources: taggedOnCreate.map(regional),
      actions: ['ec2:CreateTags'],
      conditions: {
        StringEquals: {
          'aws:RequestTag/kubernetes.io/cluster/${ClusterName}': 'owned',
          'aws:RequestTag/eks:eks-cluster-name': '${ClusterName}',
          'ec2:CreateAction': ['RunInstances', 'CreateFleet', 'CreateLaunchTemplate'],
        },
        StringLike: { 'aws:RequestTag/karpenter.sh/nodepool': '*' },
      },
    }),
    new iam.PolicyStatement({
      sid: 'AllowScopedResourceTagging',
      resources: [regional('instance/*')],
      actions: ['ec2:CreateTags'],
      conditions: {
        StringEquals: owned,
        StringLike: { 'aws:ResourceTag/karpenter.sh/nodepool': '*' },
        StringEqualsIfExists: { 'aws:RequestTag/eks:eks-cluster-name': '${ClusterName}' },
        'ForAllValues:StringEquals': {
          'aws:TagKeys': ['eks:eks-cluster-name', 'karpenter.sh/nodeclaim', 'Name'],
        },
      },
    }),
    new iam.PolicyStatement({
      sid: 'AllowScopedDeletion',
      resources: [regional('instance/*'), regional('launch-template/*')],
      actions: ['ec2:TerminateInstances', 'ec2:RebootInstances', 'ec2:DeleteLaunchTemplate'],
      conditions: {
        StringEquals: owned,
        StringLike: { 'aws:ResourceTag/karpenter.sh/nodepool': '*' },
      },
    }),
    new iam.PolicyStatement({
      sid: 'AllowRegionalReadActions',
      resources: ['*'],
      actions: [
        'ec2:DescribeCapacityReservations',
        'ec2:DescribeImages',
        'ec2:DescribeInstances',
        'ec2:DescribeInstanceTypeOfferings',
        'ec2:DescribeInstanceTypes',
        'ec2:DescribeLaunchTemplates',
        'ec2:DescribePlacementGroups',
        'ec2:DescribeSecurityGroups',
        'ec2:DescribeSpotPriceHistory',
        'ec2:DescribeSubnets',
      ],
      conditions: { StringEquals: { 'aws:RequestedRegion': '${AWS::Region}' } },
    }),
    new iam.PolicyStatement({
      sid: 'AllowPricingReadActions',
      resources: ['*'],
      actions: ['pricing:GetProducts'],
    }),
    new iam.PolicyStatement({
      sid: 'AllowSSMReadActions',
      resources: ['arn:${AWS::Partition}:ssm:${AWS::Region}::parameter/aws/service/*'],
      actions: ['ssm:GetParameter', 'ssm:GetParameters'],
    }),
    new iam.PolicyStatement({
      sid: 'AllowPassingInstanceRole',
      resources: ['${NodeRoleArn}'],
      actions: ['iam:PassRole'],
      conditions: { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
    }),
    new iam.PolicyStatement({
      sid: 'AllowScopedInstanceProfileCreationActions',
      resources: [profile],
      actions: ['iam:CreateInstanceProfile', 'iam:TagInstanceProfile'],
      conditions: {
        StringEquals: {
          'aws:RequestTag/kubernetes.io/cluster/${ClusterName}': 'owned',
          'aws:RequestTag/karpenter.k8s.aws/cluster': '${ClusterName}',
        },
      },
    }),
    new iam.PolicyStatement({
      sid: 'AllowScopedInstanceProfileActions',
      resources: [profile],
      actions: ['iam:AddRoleToInstanceProfile'],
      conditions: { StringEquals: owned },
    }),
    new iam.PolicyStatement({
      sid: 'AllowInstanceProfileReadActions',
      resources: ['arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*'],
      actions: ['iam:GetInstanceProfile'],
    }),
    new iam.PolicyStatement({
      sid: 'AllowAPIServerEndpointDiscovery',
      resources: ['arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/${ClusterName}'],
      actions: ['eks:DescribeCluster'],
    }),
    new iam.PolicyStatement({
      sid: 'AllowTickDeadLetters',
      resources: ['${TickDeadLetterQueueArn}'],
      actions: ['sqs:SendMessage'],
    }),
    new iam.PolicyStatement({
      sid: 'AllowTickFollowUps',
      resources: ['${TickFollowUpQueueArn}'],
      actions: ['sqs:SendMessage', 'sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
    }),
    new iam.PolicyStatement({
      sid: 'AllowNudges',
      resources: ['arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default'],
      actions: ['events:PutEvents'],
    }),
  ];
}

/** The variables of the statements' `Fn::Sub`. */
export interface ControllerPolicyRefs {
  readonly clusterName: string;
  readonly nodeRoleArn: string;
  readonly tickDeadLetterQueueArn: string;
  readonly tickFollowUpQueueArn: string;
}

/** The policy document, as CloudFormation takes it: the JSON text of the statements in an `Fn::Sub`. */
export function controllerDocument(refs: ControllerPolicyRefs): string {
  const document = new iam.PolicyDocument({ statements: controllerStatements() });
  const text = JSON.stringify(document.toJSON(), null, 2);
  return Fn.sub(text, {
    ClusterName: refs.clusterName,
    NodeRoleArn: refs.nodeRoleArn,
    TickDeadLetterQueueArn: refs.tickDeadLetterQueueArn,
    TickFollowUpQueueArn: refs.tickFollowUpQueueArn,
  });
}
