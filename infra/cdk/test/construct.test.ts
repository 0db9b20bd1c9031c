// The construct's own promises, checked with aws-cdk-lib/assertions: the three functions as
// the template defines them, the webhook token only as a SecureString's name, nothing granted
// implicitly, tag-scoped terminations, the rules, VPC placement and endpoints, alarm actions and
// the token's KMS key.

import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { App, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import { Fleetwright, FleetwrightProps, controllerStatements } from '../lib';
import { codeDirectory } from './code';

function synth(props: Partial<FleetwrightProps> = {}, extra?: (stack: Stack) => Partial<FleetwrightProps>): Template {
  const stack = new Stack(new App(), 'Test', { env: { account: '123456789012', region: 'eu-west-1' } });
  new Fleetwright(stack, 'Fleetwright', {
    clusterName: 'dev',
    codeDirectory: codeDirectory(),
    ...props,
    ...(extra ? extra(stack) : {}),
  });
  return Template.fromStack(stack);
}

function privateVpc(stack: Stack): ec2.IVpc {
  return ec2.Vpc.fromVpcAttributes(stack, 'Vpc', {
    vpcId: 'vpc-0123456789abcdef0',
    availabilityZones: ['eu-west-1a', 'eu-west-1b'],
    privateSubnetIds: ['subnet-0123456789abcdef0', 'subnet-0123456789abcdef1'],
  });
}

test('three functions, each with its memory, timeout and reserved concurrency', () => {
  const t = synth();
  const fn = (name: string, memory: number, timeout: number, reserved: number) =>
    t.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: `fleetwright-dev-${name}`,
      Runtime: 'provided.al2023',
      Handler: 'bootstrap',
      Architectures: ['arm64'],
      MemorySize: memory,
      Timeout: timeout,
      ReservedConcurrentExecutions: reserved,
      LoggingConfig: Match.objectLike({ LogFormat: 'JSON' }),
    });
  fn('tick', 1024, 60, 1);
  fn('interruption', 512, 30, 5);
  fn('webhook', 256, 3, 10);
  t.resourceCountIs('AWS::Lambda::Function', 3);
  t.hasResourceProperties('AWS::Lambda::Url', { AuthType: 'NONE', InvokeMode: 'BUFFERED' });
  t.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
    BatchSize: 10,
    FunctionResponseTypes: ['ReportBatchItemFailures'],
  });
});

test('the webhook token is never in the environment, only its SecureString name', () => {
  const t = synth({ webhookTokenParameterName: '/prod/fleetwright/token' });
  for (const fn of Object.values(t.findResources('AWS::Lambda::Function'))) {
    const env = fn.Properties.Environment.Variables as Record<string, unknown>;
    assert.equal(env.FLEETWRIGHT_WEBHOOK_TOKEN, undefined);
  }
  t.hasResourceProperties('AWS::Lambda::Function', {
    FunctionName: 'fleetwright-dev-webhook',
    Environment: { Variables: Match.objectLike({ FLEETWRIGHT_WEBHOOK_TOKEN_PARAMETER: '/prod/fleetwright/token' }) },
  });
  // Only the webhook's role reads it, and only that parameter.
  const roles = t.findResources('AWS::IAM::Role');
  const reading = Object.values(roles).filter((r) => JSON.stringify(r).includes('ssm:GetParameter'));
  assert.equal(reading.length, 1);
  assert.match(JSON.stringify(reading[0]), /parameter\$\{WebhookTokenParameter\}/);
  assert.match(JSON.stringify(reading[0]), /\/prod\/fleetwright\/token/);
});

test('nothing is granted implicitly: no role gets a default policy', () => {
  const t = synth({ tracing: true, alarmTopic: undefined });
  t.resourceCountIs('AWS::IAM::Policy', 0);
  t.hasResourceProperties('AWS::Lambda::Function', { TracingConfig: { Mode: 'Active' } });
  t.hasResourceProperties('AWS::IAM::Role', {
    RoleName: 'FleetwrightController-dev',
    ManagedPolicyArns: Match.arrayWith([
      { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':iam::aws:policy/AWSXRayDaemonWriteAccess']] },
    ]),
  });
});

test('every termination and every write is scoped by the cluster tag', () => {
  for (const s of controllerStatements().map((x) => x.toStatementJson())) {
    const actions: string[] = [].concat(s.Action);
    const writes = actions.filter((a) => /^ec2:(Terminate|Delete|CreateTags|RunInstances|CreateFleet|CreateLaunchTemplate)/.test(a));
    if (writes.length === 0 || s.Sid === 'AllowScopedEC2InstanceAccessActions') {
      continue; // images, snapshots, subnets and groups are read by a launch, not written
    }
    const condition = JSON.stringify(s.Condition ?? {});
    assert.match(condition, /kubernetes\.io\/cluster\/\$\{ClusterName\}|eks:eks-cluster-name/, `${s.Sid}`);
    assert.match(condition, /karpenter\.sh\/nodepool/, `${s.Sid}`);
  }
  const t = synth();
  const policy = Object.values(t.findResources('AWS::IAM::ManagedPolicy'))[0];
  const [text, vars] = policy.Properties.PolicyDocument['Fn::Sub'];
  assert.equal(vars.ClusterName, 'dev');
  assert.ok(JSON.parse(text).Statement.length >= 15);
});

test('interruption runs as its own role: no EC2 write, no PassRole, no IAM; its queue, endpoint and nudges only', () => {
  const t = synth({ tracing: true });
  const roles = t.findResources('AWS::IAM::Role');
  const [id, role] = Object.entries(roles).find(([, r]) => r.Properties.RoleName === 'FleetwrightInterruption-dev')!;
  const fn = Object.values(t.findResources('AWS::Lambda::Function')).find((f) => f.Properties.FunctionName === 'fleetwright-dev-interruption')!;
  assert.deepEqual(fn.Properties.Role, { 'Fn::GetAtt': [id, 'Arn'] });
  const actions = (role.Properties.Policies as { PolicyDocument: { Statement: { Action: string | string[] }[] } }[])
    .flatMap((p) => p.PolicyDocument.Statement)
    .flatMap((st) => [].concat(st.Action as never))
    .sort();
  assert.deepEqual(actions, ['eks:DescribeCluster', 'events:PutEvents', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:ReceiveMessage']);
  assert.equal(JSON.stringify(role.Properties.ManagedPolicyArns).includes('ControllerPolicy'), false, 'not the controller policy');
  t.hasResourceProperties('AWS::EKS::AccessEntry', {
    PrincipalArn: { 'Fn::GetAtt': [id, 'Arn'] },
    Type: 'STANDARD',
    KubernetesGroups: ['fleetwright'],
  });
});

test('five rules feed the queue; a schedule and the nudge invoke tick', () => {
  const t = synth();
  const rules = Object.values(t.findResources('AWS::Events::Rule'));
  const toQueue = rules.filter((r) => JSON.stringify(r.Properties.Targets).includes('InterruptionQueue'));
  assert.equal(toQueue.length, 5);
  t.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(1 minute)' });
  t.hasResourceProperties('AWS::Events::Rule', {
    EventPattern: { source: ['fleetwright'], 'detail-type': ['Pending Pod', 'Node Joined', 'Capacity Needed'], detail: { cluster: ['dev'] } },
  });
});

test('the interruption queue: five receives, and retention for all of them and the redrive', () => {
  const t = synth();
  t.hasResourceProperties('AWS::SQS::Queue', {
    QueueName: 'fleetwright-dev',
    VisibilityTimeout: 180,
    MessageRetentionPeriod: 1080,
    RedrivePolicy: Match.objectLike({ maxReceiveCount: 5 }),
  });
  const queue = Object.values(t.findResources('AWS::SQS::Queue')).find((q) => q.Properties.QueueName === 'fleetwright-dev')!;
  const { MessageRetentionPeriod: retention, VisibilityTimeout: visibility } = queue.Properties;
  const receives = queue.Properties.RedrivePolicy.maxReceiveCount;
  // Lambda advises at least 5 receives for an SQS source; a message must outlive them all and
  // the receive that moves it to the DLQ, or a failing one expires unseen.
  assert.ok(receives >= 5, `maxReceiveCount ${receives}`);
  assert.ok(retention >= (receives + 1) * visibility, `retention ${retention} < (${receives} + 1) x ${visibility}`);
  const fn = Object.values(t.findResources('AWS::Lambda::Function')).find((f) => f.Properties.FunctionName === 'fleetwright-dev-interruption')!;
  assert.ok(visibility >= 6 * fn.Properties.Timeout, 'visibility timeout >= 6 x the function timeout');
});

test('a private cluster: tick and interruption in the VPC, the webhook outside, six endpoints', () => {
  const t = synth({ createVpcEndpoints: true }, (stack) => ({
    vpc: privateVpc(stack),
    securityGroups: [ec2.SecurityGroup.fromSecurityGroupId(stack, 'Sg', 'sg-0123456789abcdef0')],
  }));
  const fns = Object.values(t.findResources('AWS::Lambda::Function'));
  const inVpc = fns.filter((f) => f.Properties.VpcConfig).map((f) => f.Properties.FunctionName);
  assert.deepEqual(inVpc.sort(), ['fleetwright-dev-interruption', 'fleetwright-dev-tick']);
  t.resourceCountIs('AWS::EC2::VPCEndpoint', 6);
  for (const service of ['ec2', 'ssm', 'sqs', 'events', 'sts', 'eks']) {
    t.hasResourceProperties('AWS::EC2::VPCEndpoint', { ServiceName: `com.amazonaws.eu-west-1.${service}`, PrivateDnsEnabled: true });
  }
  t.hasResourceProperties('AWS::EC2::SecurityGroupIngress', { FromPort: 443, ToPort: 443, SourceSecurityGroupId: 'sg-0123456789abcdef0' });
  t.hasResourceProperties('AWS::IAM::Role', {
    RoleName: 'FleetwrightController-dev',
    ManagedPolicyArns: Match.arrayWith([
      { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole']] },
    ]),
  });
  const noEndpoints = synth({}, (stack) => ({
    vpc: privateVpc(stack),
    securityGroups: [ec2.SecurityGroup.fromSecurityGroupId(stack, 'Sg', 'sg-0123456789abcdef0')],
  }));
  noEndpoints.resourceCountIs('AWS::EC2::VPCEndpoint', 0);
});

test('an empty or malformed webhook token parameter name is refused: the URL would answer every caller', () => {
  for (const name of ['', '   ', 'fleetwright/token', '/with space']) {
    assert.throws(() => synth({ webhookTokenParameterName: name }), /webhookTokenParameterName .* every caller/, JSON.stringify(name));
  }
  synth({ webhookTokenParameterName: '/prod/fleetwright/token.v2' });
});

test('bad VPC settings are refused with the reason', () => {
  assert.throws(() => synth({}, (stack) => ({ vpc: privateVpc(stack) })), /a vpc needs securityGroups/);
  assert.throws(() => synth({ createVpcEndpoints: true }), /createVpcEndpoints needs a vpc/);
});

test('alarms notify the topic given; the dashboard has every panel', () => {
  const t = synth({}, (stack) => ({ alarmTopic: new sns.Topic(stack, 'Topic') }));
  const alarms = Object.values(t.findResources('AWS::CloudWatch::Alarm'));
  assert.equal(alarms.length, 6);
  for (const a of alarms) {
    assert.equal(a.Properties.AlarmActions.length, 1, a.Properties.AlarmName);
  }
  t.hasResourceProperties('AWS::CloudWatch::Alarm', {
    AlarmName: 'fleetwright-dev-ticks-missed',
    MetricName: 'fleetwright_ticks_total',
    ComparisonOperator: 'LessThanThreshold',
    Threshold: 1,
    EvaluationPeriods: 5,
    TreatMissingData: 'breaching',
  });
  const body = JSON.stringify(Object.values(t.findResources('AWS::CloudWatch::Dashboard'))[0].Properties.DashboardBody);
  for (const title of ['NodeClaims created, by reason', 'NodeClaims terminated, by reason', 'Pending pods', 'Interruption messages, by kind', 'Tick duration', 'Launch failures', 'Hourly fleet cost against the LP bound']) {
    assert.ok(body.includes(title), title);
  }
});

test('a customer KMS key for the token is granted through SSM only', () => {
  const t = synth({}, (stack) => ({ webhookTokenKey: new kms.Key(stack, 'Key') }));
  t.hasResourceProperties('AWS::IAM::Role', {
    RoleName: 'FleetwrightWebhook-dev',
    Policies: [
      {
        PolicyName: 'nudge',
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Sid: 'AllowDecryptingTheToken',
              Action: 'kms:Decrypt',
              Condition: { StringEquals: { 'kms:ViaService': { 'Fn::Sub': 'ssm.${AWS::Region}.amazonaws.com' } } },
            }),
          ]),
        },
      },
    ],
  });
});
