// The CDK construct and infra/template.yaml deploy the same thing: the SAM template, after the
// SAM transform (scripts/sam-transform.py), and the construct's synthesized template agree on
// every IAM role, policy and statement, every EventBridge rule pattern and target, every queue
// and queue policy, the functions' settings, the alarms, the dashboard's panels, the access
// entries and the VPC endpoints; in both modes (public endpoint, and a private cluster with
// VPC endpoints). A change to one that is not made to the other fails here.

import { execFileSync } from 'child_process';
import * as path from 'path';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { App, CfnParameter, Stack } from 'aws-cdk-lib';
import { Template as CdkTemplate } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Fleetwright } from '../lib';
import { codeDirectory } from './code';
import { Json, Normalizer, Template, policy, sorted } from './normalize';

const REPO = path.join(__dirname, '..', '..', '..', '..');

function samTemplate(): Template {
  const python = process.env.SAM_PYTHON ?? path.join(REPO, '.venv-infra', 'bin', 'python');
  const out = execFileSync(python, [path.join(REPO, 'scripts', 'sam-transform.py'), path.join(REPO, 'infra', 'template.yaml')], {
    encoding: 'utf8',
    env: { ...process.env, AWS_DEFAULT_REGION: 'us-east-1' },
  });
  return JSON.parse(out) as Template;
}

interface Mode {
  name: string;
  /** SAM parameter values besides the defaults. */
  sam: Record<string, Json>;
  vpc: boolean;
}

const MODES: Mode[] = [
  { name: 'public endpoint', sam: {}, vpc: false },
  {
    name: 'private cluster with VPC endpoints',
    sam: { SubnetIds: ['subnet-0123456789abcdef0', 'subnet-0123456789abcdef1'], SecurityGroupIds: ['sg-0123456789abcdef0'], VpcId: 'vpc-0123456789abcdef0', CreateVpcEndpoints: 'true' },
    vpc: true,
  },
];

function samNormalizer(mode: Mode): Normalizer {
  const template = samTemplate();
  const values: Record<string, Json> = {};
  for (const [name, p] of Object.entries(template.Parameters ?? {})) {
    if (name === 'ClusterName') {
      continue;
    }
    const type = (p as { Type?: string }).Type;
    const d = p.Default ?? '';
    values[name] = type === 'CommaDelimitedList' ? String(d).split(',').filter(Boolean) : d;
  }
  return new Normalizer(template, { ...values, ...mode.sam });
}

function cdkNormalizer(mode: Mode): Normalizer {
  // Path metadata names each resource by its construct (the `cdk` CLI turns it on too).
  const app = new App({ context: { 'aws:cdk:enable-path-metadata': true } });
  const stack = new Stack(app, 'Equivalence');
  const clusterName = new CfnParameter(stack, 'ClusterName', { type: 'String' }).valueAsString;
  const vpc = mode.vpc
    ? ec2.Vpc.fromVpcAttributes(stack, 'Vpc', {
        vpcId: mode.sam.VpcId as string,
        availabilityZones: ['us-east-1a', 'us-east-1b'],
        privateSubnetIds: mode.sam.SubnetIds as string[],
      })
    : undefined;
  new Fleetwright(stack, 'Fleetwright', {
    clusterName,
    codeDirectory: codeDirectory(),
    vpc,
    securityGroups: vpc ? [ec2.SecurityGroup.fromSecurityGroupId(stack, 'Functions', (mode.sam.SecurityGroupIds as string[])[0])] : undefined,
    createVpcEndpoints: mode.vpc,
  });
  return new Normalizer(CdkTemplate.fromStack(stack).toJSON() as Template, {});
}

/** Each resource of a type, with `pick` applied, by compared name. */
function compare(
  sam: Normalizer,
  cdk: Normalizer,
  type: string,
  pick: (p: Record<string, Json>) => Json = (p) => p,
): void {
  const view = (n: Normalizer) => Object.fromEntries(Object.entries(n.ofType(type)).map(([k, v]) => [k, pick(v)]));
  assert.deepEqual(view(cdk), view(sam), `${type} differs between the CDK construct and infra/template.yaml`);
}

function roles(p: Record<string, Json>): Json {
  return {
    RoleName: p.RoleName,
    Description: p.Description,
    AssumeRolePolicyDocument: policy(p.AssumeRolePolicyDocument),
    ManagedPolicyArns: sorted(p.ManagedPolicyArns ?? []),
    Policies: ((p.Policies ?? []) as Record<string, Json>[])
      .map((x) => ({ PolicyName: x.PolicyName, PolicyDocument: policy(x.PolicyDocument) }))
      .sort((a, b) => String(a.PolicyName).localeCompare(String(b.PolicyName))),
  };
}

function functions(p: Record<string, Json>): Json {
  const env = ((p.Environment as Record<string, Json>)?.Variables ?? {}) as Record<string, Json>;
  const { Code: _code, Environment: _env, Tags: _tags, ...rest } = p;
  return { ...rest, Environment: sorted(env) };
}

function rules(p: Record<string, Json>): Json {
  return {
    Description: p.Description ?? null,
    EventPattern: p.EventPattern ?? null,
    ScheduleExpression: p.ScheduleExpression ?? null,
    Targets: ((p.Targets ?? []) as Record<string, Json>[]).map((t) => t.Arn),
  };
}

/** The dashboard's panels: title and the metric names or expressions each one plots. */
function panels(p: Record<string, Json>): Json {
  const body = JSON.parse(p.DashboardBody as string) as { widgets: { properties: Record<string, Json> }[] };
  return body.widgets
    .map((w) => {
      const text = JSON.stringify(w.properties.metrics);
      const names = text.match(/(karpenter|fleetwright)_[a-z_]+|"(Errors|ApproximateNumberOfMessagesVisible)"/g) ?? [];
      return { title: w.properties.title, metrics: [...new Set(names.map((n) => n.replace(/"/g, '')))].sort() };
    })
    .sort((a, b) => String(a.title).localeCompare(String(b.title)));
}

/** Ingress rules of the endpoint security group, inline or as resources of their own. */
function ingress(n: Normalizer): Json {
  const inline = Object.values(n.ofType('AWS::EC2::SecurityGroup')).flatMap((g) => (g.SecurityGroupIngress ?? []) as Json[]);
  const separate = Object.values(n.ofType('AWS::EC2::SecurityGroupIngress')).map((r) => {
    const { GroupId: _group, ...rule } = r;
    return rule;
  });
  return [...inline, ...separate].map((r) => {
    const { Description: _d, ...rest } = r as Record<string, Json>;
    return sorted(rest);
  });
}

for (const mode of MODES) {
  test(`the CDK construct and the SAM template agree (${mode.name})`, async (t) => {
    const sam = samNormalizer(mode);
    const cdk = cdkNormalizer(mode);
    await t.test('IAM roles, their trust, managed and inline policies', () => compare(sam, cdk, 'AWS::IAM::Role', roles));
    await t.test('the controller policy, statement by statement', () =>
      compare(sam, cdk, 'AWS::IAM::ManagedPolicy', (p) => ({
        ManagedPolicyName: p.ManagedPolicyName,
        PolicyDocument: policy(p.PolicyDocument),
      })),
    );
    await t.test('the node instance profile', () => compare(sam, cdk, 'AWS::IAM::InstanceProfile'));
    await t.test('EventBridge rules: patterns, schedules and targets', () => compare(sam, cdk, 'AWS::Events::Rule', rules));
    await t.test('queues and their settings', () => compare(sam, cdk, 'AWS::SQS::Queue'));
    await t.test('the queue policy', () =>
      compare(sam, cdk, 'AWS::SQS::QueuePolicy', (p) => ({ Queues: p.Queues, PolicyDocument: policy(p.PolicyDocument) })),
    );
    await t.test('functions: memory, timeout, concurrency, logging, tracing, DLQ, VPC, environment', () =>
      compare(sam, cdk, 'AWS::Lambda::Function', functions),
    );
    await t.test('the queue → interruption mapping', () => compare(sam, cdk, 'AWS::Lambda::EventSourceMapping'));
    await t.test('tick retries', () =>
      compare(sam, cdk, 'AWS::Lambda::EventInvokeConfig', (p) => ({
        FunctionName: p.FunctionName,
        MaximumEventAgeInSeconds: p.MaximumEventAgeInSeconds,
        MaximumRetryAttempts: p.MaximumRetryAttempts,
      })),
    );
    await t.test('the webhook URL and its public permissions', () => {
      // A function's name or its ARN: both name the webhook.
      const url = (n: Normalizer) =>
        Object.values(n.ofType('AWS::Lambda::Url')).map((u) => ({
          ...u,
          TargetFunctionArn: String(u.TargetFunctionArn).replace('.Arn}', '}'),
        }));
      assert.deepEqual(url(cdk), url(sam));
      const permissions = (n: Normalizer) =>
        Object.values(n.ofType('AWS::Lambda::Permission'))
          .map((p) => {
            const { SourceArn: _source, ...rest } = p;
            return JSON.stringify(sorted(rest)).replace(/\.Arn\}/g, '}');
          })
          .sort();
      assert.deepEqual(permissions(cdk), permissions(sam));
    });
    await t.test('log groups', () => compare(sam, cdk, 'AWS::Logs::LogGroup'));
    await t.test('alarms', () => compare(sam, cdk, 'AWS::CloudWatch::Alarm'));
    await t.test('the dashboard panels', () =>
      compare(sam, cdk, 'AWS::CloudWatch::Dashboard', (p) => ({ DashboardName: p.DashboardName, panels: panels(p) })),
    );
    await t.test('EKS access entries', () => compare(sam, cdk, 'AWS::EKS::AccessEntry'));
    await t.test('VPC endpoints and their security group', () => {
      compare(sam, cdk, 'AWS::EC2::VPCEndpoint', (p) => sorted(p));
      assert.deepEqual(ingress(cdk), ingress(sam));
      const endpoints = Object.keys(sam.ofType('AWS::EC2::VPCEndpoint')).length;
      assert.equal(endpoints, mode.vpc ? 6 : 0);
    });
  });
}
