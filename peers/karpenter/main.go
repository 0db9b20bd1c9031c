// Command karpenter-peer runs Karpenter's own provisioning scheduler on the inputs Fleetwright
// plans on, and prints the NodeClaims Karpenter would create.
//
// It drives the path Karpenter's provisioner runs for pending pods
// (provisioning.Provisioner.Schedule): the pending pods and DaemonSets are read from a
// controller-runtime fake client, the NodePools are ordered by weight and their instance types
// come from Karpenter's fake cloud provider, fed with the instance types, offerings and prices of
// the input. Karpenter's packages are a dependency, pinned in go.mod; no Karpenter source is
// copied here.
//
// Input (JSON, from the file named by the first argument, or stdin): see Input. Output (JSON, on
// stdout): see Output.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"time"

	"github.com/awslabs/operatorpkg/object"
	"github.com/awslabs/operatorpkg/status"
	"github.com/samber/lo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	fakecloud "sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	scheduler "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/test"
	testv1alpha1 "sigs.k8s.io/karpenter/pkg/test/v1alpha1"
)

// Input is what Fleetwright hands over: Kubernetes objects as the API server would hold them,
// and the instance types as Fleetwright resolved them (capacity, overhead, offerings, prices).
type Input struct {
	InstanceTypes []InstanceType     `json:"instanceTypes"`
	NodePools     []v1.NodePool      `json:"nodePools"`
	Pods          []corev1.Pod       `json:"pods"`
	DaemonSets    []appsv1.DaemonSet `json:"daemonSets"`
	Repeat        int                `json:"repeat"`
	Labels        []string           `json:"wellKnownLabels"`
}

// InstanceType is one instance type: its labels (arch, os and the provider's own, such as
// karpenter.k8s.aws/instance-family), its capacity, the overhead reserved from it, and its
// offerings.
type InstanceType struct {
	Name      string              `json:"name"`
	Labels    map[string]string   `json:"labels"`
	Capacity  corev1.ResourceList `json:"capacity"`
	Overhead  corev1.ResourceList `json:"overhead"`
	Offerings []Offering          `json:"offerings"`
}

// Offering is one zone and capacity type of an instance type, with its hourly price.
type Offering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	Available    bool    `json:"available"`
}

// Output is what Karpenter decided, and how long each run of its scheduler took.
type Output struct {
	Karpenter     string            `json:"karpenter"`
	Millis        []float64         `json:"millis"`
	NodeClaims    []NodeClaim       `json:"nodeClaims"`
	Unschedulable map[string]string `json:"unschedulable"`
}

// NodeClaim is one NodeClaim Karpenter would create: its NodePool, the pods it holds
// (namespace/name) and the instance types it may launch as, cheapest first.
type NodeClaim struct {
	NodePool      string   `json:"nodePool"`
	Pods          []string `json:"pods"`
	InstanceTypes []string `json:"instanceTypes"`
	Zones         []string `json:"zones"`
	CapacityTypes []string `json:"capacityTypes"`
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "karpenter-peer:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	in := stdin
	if len(args) > 0 {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	var input Input
	if err := json.NewDecoder(in).Decode(&input); err != nil {
		return fmt.Errorf("reading the input: %w", err)
	}
	for _, l := range input.Labels {
		// As a cloud provider registers its own labels (the AWS provider does so for
		// karpenter.k8s.aws/*), so that NodePool and pod requirements on them are honoured.
		v1.WellKnownLabels.Insert(l)
	}
	its, err := instanceTypes(input.InstanceTypes)
	if err != nil {
		return err
	}
	out := Output{Karpenter: karpenterVersion(), Unschedulable: map[string]string{}}
	repeat := max(input.Repeat, 1)
	for i := 0; i < repeat; i++ {
		results, elapsed, err := schedule(&input, its)
		if err != nil {
			return err
		}
		out.Millis = append(out.Millis, float64(elapsed.Microseconds())/1000)
		if i == 0 {
			out.NodeClaims, out.Unschedulable = describe(results)
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", " ")
	return enc.Encode(out)
}

// schedule builds a fresh cluster and provisioner and runs one Schedule, timed.
func schedule(input *Input, its []*cloudprovider.InstanceType) (scheduler.Results, time.Duration, error) {
	opts := test.Options()
	opts.IgnoreDRARequests = true
	// One scheduling worker, as Fleetwright's benchmark runs on one core.
	opts.CPURequests = 1000
	ctx := options.ToContext(context.Background(), opts)
	ctx = ctrllog.IntoContext(ctx, logging.NopLogger)

	objects := []client.Object{}
	nodeClass := object.GVK(&testv1alpha1.TestNodeClass{})
	for i := range input.NodePools {
		np := input.NodePools[i].DeepCopy()
		// The fake cloud provider serves the test node class; the EC2NodeClass's part (AMIs,
		// subnets) plays no role in scheduling.
		np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: nodeClass.Group, Kind: nodeClass.Kind, Name: "default"}
		np.StatusConditions().SetTrue(status.ConditionReady)
		objects = append(objects, np)
	}
	for i := range input.Pods {
		objects = append(objects, input.Pods[i].DeepCopy())
	}
	for i := range input.DaemonSets {
		objects = append(objects, input.DaemonSets[i].DeepCopy())
	}
	kube := fake.NewClientBuilder().
		WithScheme(scheme.Scheme).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.NodeName}
		}).
		WithObjects(objects...).
		Build()
	cloud := fakecloud.NewCloudProvider()
	cloud.InstanceTypes = its
	clk := clock.RealClock{}
	cluster := state.NewCluster(clk, kube, cloud)
	recorder := events.NewRecorder(&record.FakeRecorder{})
	provisioner := provisioning.NewProvisioner(kube, recorder, cloud, cluster, clk, nil, nil)
	start := time.Now()
	results, err := provisioner.Schedule(ctx)
	return results, time.Since(start), err
}

// instanceTypes builds Karpenter's instance types from the input: requirements from the labels,
// the offerings' zones and capacity types; all overhead as kube-reserved.
func instanceTypes(in []InstanceType) ([]*cloudprovider.InstanceType, error) {
	out := make([]*cloudprovider.InstanceType, 0, len(in))
	for _, t := range in {
		offerings := cloudprovider.Offerings{}
		for _, o := range t.Offerings {
			offerings = append(offerings, &cloudprovider.Offering{
				Requirements: scheduling.NewLabelRequirements(map[string]string{
					v1.CapacityTypeLabelKey:  o.CapacityType,
					corev1.LabelTopologyZone: o.Zone,
				}),
				Price:     o.Price,
				Available: o.Available,
			})
		}
		if len(offerings) == 0 {
			return nil, fmt.Errorf("instance type %s: field offerings: none given", t.Name)
		}
		reqs := scheduling.NewRequirements(
			scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, t.Name),
			scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, lo.Uniq(lo.Map(offerings, func(o *cloudprovider.Offering, _ int) string {
				return o.Requirements.Get(corev1.LabelTopologyZone).Any()
			}))...),
			scheduling.NewRequirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, lo.Uniq(lo.Map(offerings, func(o *cloudprovider.Offering, _ int) string {
				return o.Requirements.Get(v1.CapacityTypeLabelKey).Any()
			}))...),
		)
		for k, v := range t.Labels {
			reqs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
		}
		out = append(out, &cloudprovider.InstanceType{
			Name:         t.Name,
			Requirements: reqs,
			Offerings:    offerings,
			Capacity:     t.Capacity,
			Overhead: &cloudprovider.InstanceTypeOverhead{
				KubeReserved:      t.Overhead,
				SystemReserved:    corev1.ResourceList{},
				EvictionThreshold: corev1.ResourceList{},
			},
		})
	}
	return out, nil
}

// describe turns the scheduler's results into the output's NodeClaims and unschedulable pods.
func describe(results scheduler.Results) ([]NodeClaim, map[string]string) {
	claims := []NodeClaim{}
	for _, nc := range results.NewNodeClaims {
		claim := NodeClaim{NodePool: nc.NodePoolName}
		for _, p := range nc.Pods {
			claim.Pods = append(claim.Pods, p.Namespace+"/"+p.Name)
		}
		sort.Strings(claim.Pods)
		// Karpenter hands CreateFleet its options ordered by price (cheapest first).
		for _, it := range nc.InstanceTypeOptions.OrderByPrice(nc.Requirements) {
			claim.InstanceTypes = append(claim.InstanceTypes, it.Name)
		}
		claim.Zones = nc.Requirements.Get(corev1.LabelTopologyZone).Values()
		claim.CapacityTypes = nc.Requirements.Get(v1.CapacityTypeLabelKey).Values()
		sort.Strings(claim.Zones)
		sort.Strings(claim.CapacityTypes)
		claims = append(claims, claim)
	}
	unschedulable := map[string]string{}
	for p, err := range results.PodErrors {
		unschedulable[p.Namespace+"/"+p.Name] = err.Error()
	}
	return claims, unschedulable
}

func karpenterVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "sigs.k8s.io/karpenter" {
				return d.Version
			}
		}
	}
	return "unknown"
}
