// The `Fleetwright` construct: what infra/template.yaml creates, for a CDK app. The three
// functions from the `cargo lambda build` output, the interruption queue with its DLQ and five
// EventBridge rules, the webhook's Function URL, reserved concurrency, least-privilege IAM with
// the same tag conditions, the node role, the EKS access entries, optional VPC placement (with
// optional interface endpoints), and the dashboard and alarms (observability.ts).
//
// Construct ids are the SAM template's logical ids, so the two stacks read alike and the
// equivalence test can pair their resources.

import * as path from 'path';
import { Aws, Duration, Fn, Stack, Token } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as eks from 'aws-cdk-lib/aws-eks';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { controllerDocument } from './policy';
import { Observability } from './observability';

/** The EventBridge events the interruption queue receives, one rule each. */
export const INTERRUPTION_RULES: ReadonlyArray<[string, string, string, string]> = [
  ['HealthEventRule', 'AWS Health scheduled changes', 'aws.health', 'AWS Health Event'],
  ['SpotInterruptionRule', 'EC2 spot interruption warnings', 'aws.ec2', 'EC2 Spot Instance Interruption Warning'],
  ['RebalanceRule', 'EC2 rebalance recommendations', 'aws.ec2', 'EC2 Instance Rebalance Recommendation'],
  ['InstanceStateChangeRule', 'EC2 instance state changes', 'aws.ec2', 'EC2 Instance State-change Notification'],
  [
    'CapacityReservationInterruptionRule',
    'EC2 capacity reservation interruption warnings',
    'aws.ec2',
    'EC2 Capacity Reservation Instance Interruption Warning',
  ],
];

/** The AWS services tick and interruption call, as interface endpoint names. */
export const ENDPOINT_SERVICES: ReadonlyArray<[string, string]> = [
  ['Ec2Endpoint', 'ec2'],
  ['SsmEndpoint', 'ssm'],
  ['SqsEndpoint', 'sqs'],
  ['EventsEndpoint', 'events'],
  ['StsEndpoint', 'sts'],
  ['EksEndpoint', 'eks'],
];

/** The interruption queue's settings (the same as infra/template.yaml's). */
export const QUEUE = { retentionSeconds: 1080, visibilitySeconds: 180, maxReceiveCount: 5 } as const;

export interface FleetwrightProps {
  /** The EKS cluster Fleetwright manages (a name, or a token such as a CfnParameter's value). */
  readonly clusterName: string;
  /**
   * The `cargo lambda build` output: a directory with `tick/bootstrap`,
   * `interruption/bootstrap` and `webhook/bootstrap`. Default: `target/lambda` of the repository.
   */
  readonly codeDirectory?: string;
  /** Default ARM_64 (Graviton), as `cargo lambda build --arm64` builds. */
  readonly architecture?: lambda.Architecture;
  /** Namespace of the tick Lease, the state ConfigMap and the Events. Default `karpenter`. */
  readonly namespace?: string;
  /** Kubernetes group the controller role maps to (`fleetwright manifests` binds it). */
  readonly kubernetesGroup?: string;
  /** Create the EKS access entries (controller and interruption roles → group, node role → EC2_LINUX). Default true. */
  readonly createAccessEntries?: boolean;
  /** Plan and log only. Default false. */
  readonly dryRun?: boolean;
  /**
   * Replace nodes unhealthy past their toleration, as Karpenter's `NodeRepair` feature gate
   * (never while more than 20% of a NodePool is unhealthy). Default false.
   */
  readonly nodeRepair?: boolean;
  /**
   * With `nodeRepair`: repair as Karpenter did before v1.15 (its `--legacy-node-repair`): no
   * disruption budgets, and a node that is not Ready has its pods deleted at once. Default false.
   */
  readonly legacyNodeRepair?: boolean;
  /**
   * With `nodeRepair`: reboot a node whose only fault is one a reboot clears (the GPU XID codes
   * the AWS provider names) instead of replacing it, at most twice in 24 hours, as Karpenter's
   * `RebootForRepair` feature gate. Default false.
   */
  readonly rebootForRepair?: boolean;
  /**
   * The cluster CA bundle Karpenter's EC2NodeClass drift hash takes, only when Karpenter was given
   * one (its `settings.clusterCABundle`). Default: none, and the tick reads `kube-root-ca.crt`.
   */
  readonly clusterCaBundle?: string;
  /**
   * Evaluate CEL expressions in EC2NodeClass kubelet settings per instance type, as Karpenter
   * v1.15's `NodeClassCEL` feature gate. Default false.
   */
  readonly nodeClassCel?: boolean;
  /**
   * Delete a static NodePool's drifted node before its replacement when the pool is at its
   * `limits.nodes`, its refill taking the freed slot, as Karpenter v1.15's `TerminateFirstDrift`
   * feature gate. Default false: such a node is kept and reported blocked.
   */
  readonly terminateFirstDrift?: boolean;
  /**
   * With `nodeRepair`: the same for an unhealthy node, as Karpenter v1.15's
   * `TerminateFirstRepair` feature gate. Default false.
   */
  readonly terminateFirstRepair?: boolean;
  /**
   * Let consolidation replace a spot node with a cheaper spot node, as Karpenter's
   * `SpotToSpotConsolidation` feature gate. Default false: spot nodes are consolidated only by
   * deletion.
   */
  readonly spotToSpotConsolidation?: boolean;
  /**
   * Karpenter v1.15's scheduler config document (its `SCHEDULER_CONFIG`): the cluster's
   * kube-scheduler `podTopologySpread.defaultConstraints`. Default: none.
   */
  readonly schedulerConfig?: string;
  /**
   * Let tick follow up on its own disruption steps through its follow-up queue (a decision
   * confirmed 15 s after it is made, a step in flight looked at every 10 s) instead of waiting
   * for the next minute. Default true.
   */
  readonly followUps?: boolean;
  /** Active X-Ray tracing. Default false. */
  readonly tracing?: boolean;
  /** Default two weeks. */
  readonly logRetention?: logs.RetentionDays;
  /** Tick's memory in MB. Default 1024. */
  readonly tickMemorySize?: number;
  /**
   * The SSM SecureString parameter holding the webhook token (create it before deploying).
   * Default `/fleetwright/webhook-token`.
   */
  readonly webhookTokenParameterName?: string;
  /** The KMS key of that SecureString when it is not aws/ssm. */
  readonly webhookTokenKey?: kms.IKey;
  /** Private clusters: the VPC to place tick and interruption in. The webhook stays outside. */
  readonly vpc?: ec2.IVpc;
  /** With `vpc`: the subnets. Default: the VPC's private subnets. */
  readonly vpcSubnets?: ec2.SubnetSelection;
  /** With `vpc`: the functions' security groups (required with a VPC). */
  readonly securityGroups?: ec2.ISecurityGroup[];
  /** With `vpc`: create the EC2, SSM, SQS, EventBridge, STS and EKS interface endpoints. */
  readonly createVpcEndpoints?: boolean;
  /** Where the alarms send notifications (default: nowhere; they only change state). */
  readonly alarmTopic?: sns.ITopic;
}

/**
 * The webhook token's SSM parameter name, checked as the SAM template's `AllowedPattern` checks
 * it. An empty name would start the webhook with no token, its public URL answering every
 * caller, so it is refused at synth (a CloudFormation parameter's value is checked by its own
 * pattern).
 */
export function webhookTokenParameter(props: FleetwrightProps): string {
  const name = props.webhookTokenParameterName ?? '/fleetwright/webhook-token';
  if (!Token.isUnresolved(name) && !/^\/[A-Za-z0-9_.\/-]+$/.test(name)) {
    throw new Error(
      `Fleetwright: webhookTokenParameterName ${JSON.stringify(name)} is not an SSM parameter name such as ` +
        '/fleetwright/webhook-token; without one the webhook URL would answer every caller',
    );
  }
  return name;
}

export class Fleetwright extends Construct {
  public readonly tick: lambda.Function;
  public readonly interruption: lambda.Function;
  public readonly webhook: lambda.Function;
  public readonly webhookUrl: lambda.FunctionUrl;
  public readonly interruptionQueue: sqs.Queue;
  public readonly interruptionDeadLetterQueue: sqs.Queue;
  public readonly tickDeadLetterQueue: sqs.Queue;
  public readonly tickFollowUpQueue: sqs.Queue;
  public readonly controllerRole: iam.Role;
  public readonly interruptionRole: iam.Role;
  public readonly webhookRole: iam.Role;
  public readonly nodeRole: iam.Role;
  public readonly instanceProfile: iam.CfnInstanceProfile;
  public readonly observability: Observability;

  constructor(scope: Construct, id: string, props: FleetwrightProps) {
    super(scope, id);
    if (props.vpc && !props.securityGroups?.length) {
      throw new Error('Fleetwright: a vpc needs securityGroups (allowed into the cluster endpoint on 443)');
    }
    if (props.createVpcEndpoints && !props.vpc) {
      throw new Error('Fleetwright: createVpcEndpoints needs a vpc');
    }
    const tokenParameter = webhookTokenParameter(props);
    const cluster = props.clusterName;
    const name = (suffix: string) => Fn.join('', ['fleetwright-', cluster, suffix]);

    this.tickDeadLetterQueue = new sqs.Queue(this, 'TickDeadLetterQueue', {
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });
    // Tick's follow-ups to itself, each sent with the delay the tick asked for (up to 15
    // minutes). Retention covers the longest delay and a few receives; the visibility timeout is
    // tick's timeout and a little more, so a follow-up that found tick busy comes back soon.
    this.tickFollowUpQueue = new sqs.Queue(this, 'TickFollowUpQueue', {
      queueName: name('-follow-up'),
      retentionPeriod: Duration.seconds(1200),
      visibilityTimeout: Duration.seconds(65),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });
    this.interruptionDeadLetterQueue = new sqs.Queue(this, 'InterruptionDeadLetterQueue', {
      queueName: name('-dlq'),
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });
    // Every message gets all its receives before it expires, and the receive that moves it to
    // the DLQ too (retention >= (maxReceiveCount + 1) x visibility timeout = 6 x 180 s); the
    // visibility timeout is six times the function's; at least 5 receives, as Lambda advises
    // for SQS sources (a receive while the function is throttled counts).
    this.interruptionQueue = new sqs.Queue(this, 'InterruptionQueue', {
      queueName: name(''),
      retentionPeriod: Duration.seconds(QUEUE.retentionSeconds),
      visibilityTimeout: Duration.seconds(QUEUE.visibilitySeconds),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      deadLetterQueue: { queue: this.interruptionDeadLetterQueue, maxReceiveCount: QUEUE.maxReceiveCount },
    });
    this.queuePolicy();

    this.nodeRole = this.makeNodeRole(cluster);
    this.instanceProfile = new iam.CfnInstanceProfile(this, 'NodeInstanceProfile', {
      instanceProfileName: Fn.join('', ['FleetwrightNodeInstanceProfile-', cluster]),
      roles: [this.nodeRole.roleName],
    });
    this.controllerRole = this.makeControllerRole(cluster, props);
    this.interruptionRole = this.makeInterruptionRole(cluster, props);
    this.webhookRole = this.makeWebhookRole(cluster, props, tokenParameter);

    const code = props.codeDirectory ?? path.join(__dirname, '..', '..', '..', '..', 'target', 'lambda');
    const environment: Record<string, string> = {
      FLEETWRIGHT_CLUSTER_NAME: cluster,
      FLEETWRIGHT_NAMESPACE: props.namespace ?? 'karpenter',
      FLEETWRIGHT_EVENT_BUS: 'default',
      FLEETWRIGHT_DRY_RUN: props.dryRun ? 'true' : 'false',
      FLEETWRIGHT_NODE_REPAIR: props.nodeRepair ? 'true' : 'false',
      FLEETWRIGHT_LEGACY_NODE_REPAIR: props.legacyNodeRepair ? 'true' : 'false',
      FLEETWRIGHT_REBOOT_FOR_REPAIR: props.rebootForRepair ? 'true' : 'false',
      FLEETWRIGHT_CLUSTER_CA_BUNDLE: props.clusterCaBundle ?? '',
      FLEETWRIGHT_NODE_CLASS_CEL: props.nodeClassCel ? 'true' : 'false',
      FLEETWRIGHT_TERMINATE_FIRST_DRIFT: props.terminateFirstDrift ? 'true' : 'false',
      FLEETWRIGHT_TERMINATE_FIRST_REPAIR: props.terminateFirstRepair ? 'true' : 'false',
      FLEETWRIGHT_SPOT_TO_SPOT_CONSOLIDATION: props.spotToSpotConsolidation ? 'true' : 'false',
      FLEETWRIGHT_SCHEDULER_CONFIG: props.schedulerConfig ?? '',
    };
    const common = (fn: string, logGroupId: string) => ({
      functionName: name(`-${fn}`),
      runtime: lambda.Runtime.PROVIDED_AL2023,
      handler: 'bootstrap',
      code: lambda.Code.fromAsset(path.join(code, fn)),
      architecture: props.architecture ?? lambda.Architecture.ARM_64,
      loggingFormat: lambda.LoggingFormat.JSON,
      applicationLogLevelV2: lambda.ApplicationLogLevel.INFO,
      systemLogLevelV2: lambda.SystemLogLevel.WARN,
      logGroup: new logs.LogGroup(this, logGroupId, {
        logGroupName: Fn.join('', ['/aws/lambda/fleetwright-', cluster, `-${fn}`]),
        retention: props.logRetention ?? logs.RetentionDays.TWO_WEEKS,
      }),
    });
    const placement = props.vpc
      ? { vpc: props.vpc, vpcSubnets: props.vpcSubnets, securityGroups: props.securityGroups }
      : {};

    this.tick = new lambda.Function(this, 'TickFunction', {
      ...common('tick', 'TickLogGroup'),
      ...placement,
      description: 'Provisioning, registration, disruption and garbage collection, once a minute and on each nudge.',
      memorySize: props.tickMemorySize ?? 1024,
      timeout: Duration.seconds(60),
      reservedConcurrentExecutions: 1,
      role: this.controllerRole,
      // Only tick reads these (a mistake in them never stops interruption or the webhook).
      environment: {
        ...environment,
        FLEETWRIGHT_FOLLOW_UP: props.followUps === false ? 'false' : 'true',
        FLEETWRIGHT_FOLLOW_UP_QUEUE_URL: this.tickFollowUpQueue.queueUrl,
      },
    });
    this.tick.configureAsyncInvoke({ maxEventAge: Duration.seconds(120), retryAttempts: 1 });
    this.interruption = new lambda.Function(this, 'InterruptionFunction', {
      ...common('interruption', 'InterruptionLogGroup'),
      ...placement,
      description: 'Cordons and drains nodes on spot interruptions, rebalance, state changes and health events.',
      memorySize: 512,
      timeout: Duration.seconds(30),
      // Capacity of its own, so a flood of webhook calls cannot starve spot handling.
      reservedConcurrentExecutions: 5,
      // Its own role: it launches, passes and terminates nothing.
      role: this.interruptionRole,
      environment,
    });
    this.webhook = new lambda.Function(this, 'WebhookFunction', {
      ...common('webhook', 'WebhookLogGroup'),
      description: 'Admission webhook for pod CREATE; always admits and nudges tick.',
      memorySize: 256,
      timeout: Duration.seconds(3),
      reservedConcurrentExecutions: 10,
      role: this.webhookRole,
      environment: {
        ...environment,
        FLEETWRIGHT_WEBHOOK_TOKEN_PARAMETER: tokenParameter,
      },
    });
    // Set on the resources directly: the L2 options would also grant the role what the
    // policies above already grant (SendMessage to the DLQ, X-Ray writes), as extra statements.
    for (const fn of [this.tick, this.interruption, this.webhook]) {
      const cfn = fn.node.defaultChild as lambda.CfnFunction;
      cfn.tracingConfig = { mode: props.tracing ? 'Active' : 'PassThrough' };
      // The role's GetAtt orders it already (cfn-lint W3005); its policies are its own.
      cfn.addDeletionOverride('DependsOn');
    }
    (this.tick.node.defaultChild as lambda.CfnFunction).deadLetterConfig = {
      targetArn: this.tickDeadLetterQueue.queueArn,
    };

    // The API server cannot sign SigV4 requests; the URL answers only on /admit/<token>.
    this.webhookUrl = this.webhook.addFunctionUrl({
      authType: lambda.FunctionUrlAuthType.NONE,
      invokeMode: lambda.InvokeMode.BUFFERED,
    });
    new lambda.EventSourceMapping(this, 'TickFunctionFollowUp', {
      target: this.tick,
      eventSourceArn: this.tickFollowUpQueue.queueArn,
      batchSize: 10,
      maxBatchingWindow: Duration.seconds(0),
      // The lowest the event source mapping takes; tick's reserved concurrency of 1 holds the
      // second back (a throttled follow-up returns after the visibility timeout).
      maxConcurrency: 2,
    });
    new lambda.EventSourceMapping(this, 'InterruptionFunctionQueue', {
      target: this.interruption,
      eventSourceArn: this.interruptionQueue.queueArn,
      batchSize: 10,
      maxBatchingWindow: Duration.seconds(0),
      reportBatchItemFailures: true,
    });
    this.rules(cluster);
    if (props.createAccessEntries ?? true) {
      this.accessEntries(cluster, props.kubernetesGroup ?? 'fleetwright');
    }
    if (props.vpc && props.createVpcEndpoints) {
      this.endpoints(props.vpc, props.vpcSubnets, props.securityGroups![0]);
    }
    this.observability = new Observability(this, 'Observability', {
      clusterName: cluster,
      functions: { tick: this.tick, interruption: this.interruption, webhook: this.webhook },
      interruptionDeadLetterQueue: this.interruptionDeadLetterQueue,
      tickDeadLetterQueue: this.tickDeadLetterQueue,
      alarmTopic: props.alarmTopic,
    });
  }

  private queuePolicy(): void {
    const policy = new sqs.QueuePolicy(this, 'InterruptionQueuePolicy', { queues: [this.interruptionQueue] });
    policy.document.addStatements(
      new iam.PolicyStatement({
        sid: 'AllowEventBridgeAndSqs',
        principals: [new iam.ServicePrincipal('events.amazonaws.com'), new iam.ServicePrincipal('sqs.amazonaws.com')],
        actions: ['sqs:SendMessage'],
        resources: [this.interruptionQueue.queueArn],
        conditions: { StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID } },
      }),
      new iam.PolicyStatement({
        sid: 'DenyHTTP',
        effect: iam.Effect.DENY,
        principals: [new iam.AnyPrincipal()],
        actions: ['sqs:*'],
        resources: [this.interruptionQueue.queueArn],
        conditions: { Bool: { 'aws:SecureTransport': 'false' } },
      }),
    );
  }

  private rules(cluster: string): void {
    // A target that only points at the queue: the queue policy above already lets EventBridge
    // send (the stock SqsQueue target would add a statement of its own).
    const queue = this.interruptionQueue;
    const toQueue: events.IRuleTarget = { bind: () => ({ id: 'InterruptionQueue', arn: queue.queueArn }) };
    for (const [id, what, source, detailType] of INTERRUPTION_RULES) {
      new events.Rule(this, id, {
        description: `${what} -> Fleetwright interruption queue`,
        eventPattern: { source: [source], detailType: [detailType] },
        targets: [toQueue],
      });
    }
    new events.Rule(this, 'TickFunctionSchedule', {
      description: 'Fleetwright reconcile, every minute.',
      schedule: events.Schedule.rate(Duration.minutes(1)),
      targets: [new targets.LambdaFunction(this.tick)],
    });
    new events.Rule(this, 'TickFunctionNudge', {
      eventPattern: {
        source: ['fleetwright'],
        detailType: ['Pending Pod', 'Node Joined', 'Capacity Needed'],
        detail: { cluster: [cluster] },
      },
      targets: [new targets.LambdaFunction(this.tick)],
    });
  }

  private lambdaPrincipal(): iam.IPrincipal {
    return new iam.PrincipalWithConditions(new iam.ServicePrincipal('lambda.amazonaws.com'), {
      StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID },
    });
  }

  private basicPolicies(props: FleetwrightProps, vpc: boolean): iam.IManagedPolicy[] {
    const policies = [iam.ManagedPolicy.fromAwsManagedPolicyName('service-role/AWSLambdaBasicExecutionRole')];
    if (props.tracing) {
      policies.push(iam.ManagedPolicy.fromAwsManagedPolicyName('AWSXRayDaemonWriteAccess'));
    }
    if (vpc) {
      policies.push(iam.ManagedPolicy.fromAwsManagedPolicyName('service-role/AWSLambdaVPCAccessExecutionRole'));
    }
    return policies;
  }

  private makeNodeRole(cluster: string): iam.Role {
    return new iam.Role(this, 'NodeRole', {
      roleName: Fn.join('', ['FleetwrightNodeRole-', cluster]),
      description: 'Role of the nodes Fleetwright launches (EC2NodeClass spec.role)',
      assumedBy: new iam.ServicePrincipal(Fn.sub('ec2.${AWS::URLSuffix}')),
      managedPolicies: [
        'AmazonEKS_CNI_Policy',
        'AmazonEKSWorkerNodePolicy',
        'AmazonEC2ContainerRegistryReadOnly',
        'AmazonSSMManagedInstanceCore',
      ].map((n) => iam.ManagedPolicy.fromAwsManagedPolicyName(n)),
    });
  }

  private makeControllerRole(cluster: string, props: FleetwrightProps): iam.Role {
    const policy = new iam.CfnManagedPolicy(this, 'ControllerPolicy', {
      managedPolicyName: Fn.join('', ['FleetwrightControllerPolicy-', cluster]),
      policyDocument: controllerDocument({
        clusterName: cluster,
        nodeRoleArn: this.nodeRole.roleArn,
        tickDeadLetterQueueArn: this.tickDeadLetterQueue.queueArn,
        tickFollowUpQueueArn: this.tickFollowUpQueue.queueArn,
      }),
    });
    return new iam.Role(this, 'ControllerRole', {
      roleName: Fn.join('', ['FleetwrightController-', cluster]),
      description: 'tick function of Fleetwright',
      assumedBy: this.lambdaPrincipal(),
      managedPolicies: [
        ...this.basicPolicies(props, props.vpc !== undefined),
        iam.ManagedPolicy.fromManagedPolicyArn(this, 'ControllerPolicyRef', policy.ref),
      ],
    });
  }

  /**
   * The interruption function's role: its queue (for the event source mapping), the cluster's
   * endpoint, and nudges. It cordons, drains and deletes NodeClaims through the Kubernetes API
   * (its access entry), and calls no EC2 action.
   */
  private makeInterruptionRole(cluster: string, props: FleetwrightProps): iam.Role {
    const statements = [
      new iam.PolicyStatement({
        sid: 'AllowInterruptionQueueActions',
        actions: ['sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:ReceiveMessage'],
        resources: [this.interruptionQueue.queueArn],
      }),
      new iam.PolicyStatement({
        sid: 'AllowAPIServerEndpointDiscovery',
        actions: ['eks:DescribeCluster'],
        resources: [
          Fn.sub('arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/${ClusterName}', { ClusterName: cluster }),
        ],
      }),
      new iam.PolicyStatement({
        sid: 'AllowNudges',
        actions: ['events:PutEvents'],
        resources: [Fn.sub('arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default')],
      }),
    ];
    return new iam.Role(this, 'InterruptionRole', {
      roleName: Fn.join('', ['FleetwrightInterruption-', cluster]),
      description:
        'interruption function of Fleetwright (reads its queue, cordons, drains and deletes NodeClaims through the Kubernetes API, nudges tick; no EC2 writes)',
      assumedBy: this.lambdaPrincipal(),
      managedPolicies: this.basicPolicies(props, props.vpc !== undefined),
      inlinePolicies: { interruption: new iam.PolicyDocument({ statements }) },
    });
  }

  private makeWebhookRole(cluster: string, props: FleetwrightProps, parameter: string): iam.Role {
    const statements = [
      new iam.PolicyStatement({
        sid: 'AllowNudges',
        actions: ['events:PutEvents'],
        resources: [Fn.sub('arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default')],
      }),
      new iam.PolicyStatement({
        sid: 'AllowReadingTheToken',
        actions: ['ssm:GetParameter'],
        resources: [
          Fn.sub('arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${WebhookTokenParameter}', {
            WebhookTokenParameter: parameter,
          }),
        ],
      }),
    ];
    if (props.webhookTokenKey) {
      statements.push(
        new iam.PolicyStatement({
          sid: 'AllowDecryptingTheToken',
          actions: ['kms:Decrypt'],
          resources: [props.webhookTokenKey.keyArn],
          conditions: { StringEquals: { 'kms:ViaService': Fn.sub('ssm.${AWS::Region}.amazonaws.com') } },
        }),
      );
    }
    return new iam.Role(this, 'WebhookRole', {
      roleName: Fn.join('', ['FleetwrightWebhook-', cluster]),
      description: 'webhook function of Fleetwright (puts Pending Pod and Node Joined nudges on the bus, nothing else)',
      assumedBy: this.lambdaPrincipal(),
      managedPolicies: this.basicPolicies(props, false),
      inlinePolicies: { nudge: new iam.PolicyDocument({ statements }) },
    });
  }

  private accessEntries(cluster: string, group: string): void {
    new eks.CfnAccessEntry(this, 'ControllerAccessEntry', {
      clusterName: cluster,
      principalArn: this.controllerRole.roleArn,
      type: 'STANDARD',
      kubernetesGroups: [group],
    });
    new eks.CfnAccessEntry(this, 'InterruptionAccessEntry', {
      clusterName: cluster,
      principalArn: this.interruptionRole.roleArn,
      type: 'STANDARD',
      kubernetesGroups: [group],
    });
    new eks.CfnAccessEntry(this, 'NodeAccessEntry', {
      clusterName: cluster,
      principalArn: this.nodeRole.roleArn,
      type: 'EC2_LINUX',
    });
  }

  private endpoints(vpc: ec2.IVpc, subnets: ec2.SubnetSelection | undefined, functions: ec2.ISecurityGroup): void {
    const group = new ec2.SecurityGroup(this, 'EndpointSecurityGroup', {
      vpc,
      description: 'Fleetwright VPC endpoints, reachable on 443 from the functions',
    });
    group.addIngressRule(functions, ec2.Port.tcp(443), 'tick and interruption');
    for (const [id, service] of ENDPOINT_SERVICES) {
      new ec2.InterfaceVpcEndpoint(this, id, {
        vpc,
        service: new ec2.InterfaceVpcEndpointService(`com.amazonaws.${Stack.of(this).region}.${service}`, 443),
        privateDnsEnabled: true,
        subnets,
        securityGroups: [group],
        // Only the functions' group reaches them (the rule above), not the whole VPC.
        open: false,
      });
    }
  }
}
