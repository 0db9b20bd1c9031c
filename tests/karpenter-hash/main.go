// Command karpenter-hash prints the drift hashes Karpenter itself computes, with Karpenter's
// own types and code (sigs.k8s.io/karpenter and github.com/aws/karpenter-provider-aws at the
// versions go.mod pins), so that Fleetwright's port of them can be checked against the
// original: shared/crds/tests/karpenter_hash.rs writes generated objects to this command's stdin
// and compares.
//
// Each input line is a JSON object {"kind": "NodePool" | "EC2NodeClass", "object": {...},
// "caBundle": "..."}; each output line is the hash, in decimal as Karpenter writes it to
// karpenter.sh/nodepool-hash or karpenter.k8s.aws/ec2nodeclass-hash, or "error: ..." for an
// object Karpenter's types cannot read.
//
// Each object is first read as the API server serves it (see asServed), since Karpenter never sees
// the bytes a user wrote: EC2NodeClass.Hash hashes the kubelet's raw JSON (KubeletConfiguration is
// a map of apiextensionsv1.JSON since v1.15), so the served form of its numbers and strings counts.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	kjson "sigs.k8s.io/json"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

type input struct {
	Kind     string          `json:"kind"`
	Object   json.RawMessage `json:"object"`
	CABundle *string         `json:"caBundle"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		fmt.Fprintln(out, hash(in.Bytes()))
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "karpenter-hash:", err)
		os.Exit(1)
	}
}

// asServed is the object as the API server stores and serves a custom resource: decoded into
// untyped values (integers as int64, any other number as float64) and encoded again with
// encoding/json (keys sorted, Go's number and string forms).
func asServed(object []byte) ([]byte, error) {
	var untyped any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(object, &untyped); err != nil {
		return nil, err
	}
	return json.Marshal(untyped)
}

func hash(line []byte) string {
	var i input
	if err := json.Unmarshal(line, &i); err != nil {
		return "error: " + err.Error()
	}
	object, err := asServed(i.Object)
	if err != nil {
		return "error: " + err.Error()
	}
	switch i.Kind {
	case "NodePool":
		var np karpv1.NodePool
		if err := kjson.UnmarshalCaseSensitivePreserveInts(object, &np); err != nil {
			return "error: " + err.Error()
		}
		return np.Hash()
	case "EC2NodeClass":
		var nc awsv1.EC2NodeClass
		if err := kjson.UnmarshalCaseSensitivePreserveInts(object, &nc); err != nil {
			return "error: " + err.Error()
		}
		return nc.Hash(i.CABundle)
	default:
		return "error: unknown kind " + i.Kind
	}
}
