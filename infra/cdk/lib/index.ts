// fleetwright-cdk: Fleetwright (serverless, Karpenter-compatible node autoscaling for EKS) as
// one CDK construct. See docs/deploy.md.

export * from './fleetwright';
export * from './observability';
export { controllerStatements, controllerDocument } from './policy';
