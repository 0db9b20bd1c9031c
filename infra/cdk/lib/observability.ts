// The dashboard and alarms of a Fleetwright stack, as infra/template.yaml has them: the
// dashboard reads the EMF metrics the functions print (namespace `Fleetwright`, dimension
// `cluster`, and `reason` or `kind` for the breakdowns); the alarms fire on a dead letter, on
// function errors, and when no tick finished for five minutes.

import { Duration, Fn } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

export const NAMESPACE = 'Fleetwright';

export interface ObservabilityProps {
  readonly clusterName: string;
  readonly functions: { tick: lambda.IFunction; interruption: lambda.IFunction; webhook: lambda.IFunction };
  readonly interruptionDeadLetterQueue: sqs.IQueue;
  readonly tickDeadLetterQueue: sqs.IQueue;
  readonly alarmTopic?: sns.ITopic;
}

export class Observability extends Construct {
  public readonly dashboard: cloudwatch.Dashboard;
  public readonly alarms: cloudwatch.Alarm[] = [];

  constructor(scope: Construct, id: string, props: ObservabilityProps) {
    super(scope, id);
    const cluster = props.clusterName;
    const metric = (name: string, statistic: string, period = Duration.minutes(1)) =>
      new cloudwatch.Metric({ namespace: NAMESPACE, metricName: name, dimensionsMap: { cluster }, statistic, period });
    const search = (dimension: string, name: string, label: string) =>
      new cloudwatch.MathExpression({
        expression: Fn.join('', [
          `SEARCH('{${NAMESPACE},cluster,${dimension}} MetricName="${name}" cluster="`,
          cluster,
          `"', 'Sum', 60)`,
        ]),
        label,
        period: Duration.minutes(1),
        usingMetrics: {},
      });
    const graph = (title: string, left: cloudwatch.IMetric[], width = 12, right: cloudwatch.IMetric[] = []) =>
      new cloudwatch.GraphWidget({ title, left, right, width, height: 6 });
    const errors = (fn: lambda.IFunction) => fn.metricErrors({ statistic: 'Sum', period: Duration.minutes(1) });
    const visible = (q: sqs.IQueue) =>
      q.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: Duration.minutes(1) });

    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: Fn.join('', ['fleetwright-', cluster]),
      widgets: [
        [
          graph('NodeClaims created, by reason', [search('reason', 'karpenter_nodeclaims_created_total', 'created')]),
          graph('NodeClaims terminated, by reason', [search('reason', 'karpenter_nodeclaims_terminated_total', 'terminated')]),
        ],
        [
          graph('Pending pods', [metric('karpenter_pods_state', 'Maximum')], 8),
          graph('Interruption messages, by kind', [search('kind', 'karpenter_interruption_received_messages_total', 'messages')], 8),
          graph('Launch failures', [metric('karpenter_cloudprovider_instance_launch_failures_total', 'Sum')], 8),
        ],
        [
          graph(
            'Tick duration (s)',
            [metric('fleetwright_tick_duration_seconds', 'Average'), metric('fleetwright_tick_duration_seconds', 'Maximum')],
            12,
            [metric('fleetwright_ticks_total', 'Sum')],
          ),
          graph('Hourly fleet cost against the LP bound ($/h)', [
            metric('fleetwright_fleet_hourly_cost', 'Average', Duration.minutes(5)),
            metric('fleetwright_fleet_hourly_lower_bound', 'Average', Duration.minutes(5)),
          ]),
        ],
        [
          graph('Function errors', [errors(props.functions.tick), errors(props.functions.interruption), errors(props.functions.webhook)]),
          graph('Dead-letter queues (messages)', [visible(props.interruptionDeadLetterQueue), visible(props.tickDeadLetterQueue)]),
        ],
      ],
    });

    const alarm = (
      id: string,
      suffix: string,
      description: string,
      m: cloudwatch.Metric,
      options: Partial<cloudwatch.AlarmProps> = {},
    ) => {
      const a = new cloudwatch.Alarm(this, id, {
        alarmName: Fn.join('', ['fleetwright-', cluster, suffix]),
        alarmDescription: description,
        metric: m,
        evaluationPeriods: 1,
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        ...options,
      });
      if (props.alarmTopic) {
        a.addAlarmAction(new actions.SnsAction(props.alarmTopic));
      }
      this.alarms.push(a);
    };
    alarm(
      'InterruptionDlqAlarm',
      '-interruption-dlq',
      'Interruption messages failed five times and wait in the DLQ (`fleetwright queue` redrives them).',
      visible(props.interruptionDeadLetterQueue),
    );
    alarm('TickDlqAlarm', '-tick-dlq', 'Tick invocations failed twice and were dead-lettered.', visible(props.tickDeadLetterQueue));
    const fiveMinuteErrors = (fn: lambda.IFunction) => fn.metricErrors({ statistic: 'Sum', period: Duration.minutes(5) });
    alarm('TickErrorsAlarm', '-tick-errors', 'The tick function returned errors.', fiveMinuteErrors(props.functions.tick));
    alarm(
      'InterruptionErrorsAlarm',
      '-interruption-errors',
      'The interruption function returned errors.',
      fiveMinuteErrors(props.functions.interruption),
    );
    alarm(
      'WebhookErrorsAlarm',
      '-webhook-errors',
      'The webhook function returned errors (admission is not blocked; nudges are lost).',
      fiveMinuteErrors(props.functions.webhook),
    );
    alarm(
      'TicksMissedAlarm',
      '-ticks-missed',
      'No tick finished for 5 minutes (the schedule runs one a minute).',
      metric('fleetwright_ticks_total', 'Sum'),
      {
        evaluationPeriods: 5,
        datapointsToAlarm: 5,
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.BREACHING,
      },
    );
  }
}
