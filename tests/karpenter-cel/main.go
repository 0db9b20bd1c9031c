// Command karpenter-cel prints what Karpenter v1.15.0's own kubelet CEL environment makes of
// expressions (github.com/aws/karpenter-provider-aws/pkg/cel): for each JSON line on stdin, an
// expression, the instance-type variables and an optional reserved resource, one JSON line on
// stdout with whether it compiles, and its value or evaluation error. A resource given, the value
// is the quantity Karpenter writes for that reservation (rounded), or empty when Karpenter drops
// the entry. Fleetwright's port is compared with these answers (scripts/karpenter-cel.sh).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	kubeletcel "github.com/aws/karpenter-provider-aws/pkg/cel"
)

type input struct {
	Expression string                      `json:"expression"`
	Resource   string                      `json:"resource,omitempty"`
	Vars       kubeletcel.InstanceTypeVars `json:"vars"`
}

type output struct {
	Expression   string                      `json:"expression"`
	Resource     string                      `json:"resource,omitempty"`
	Vars         kubeletcel.InstanceTypeVars `json:"vars"`
	CompileError string                      `json:"compileError,omitempty"`
	EvalError    string                      `json:"evalError,omitempty"`
	Value        *string                     `json:"value,omitempty"`
}

func main() {
	env, err := kubeletcel.NewEnvironment()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var q input
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := out.Encode(answer(env, q)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func answer(env *kubeletcel.CELEnvironment, q input) output {
	a := output{Expression: q.Expression, Resource: q.Resource, Vars: q.Vars}
	if _, err := env.Compile(q.Expression); err != nil {
		a.CompileError = err.Error()
		return a
	}
	if q.Resource == "" {
		v, err := env.EvaluateExpression(q.Expression, q.Vars)
		if err != nil {
			a.EvalError = err.Error()
			return a
		}
		s := strconv.FormatInt(v, 10)
		a.Value = &s
		return a
	}
	resolved, err := env.ResolveResourceMap(context.Background(), map[string]string{q.Resource: q.Expression},
		func() (kubeletcel.InstanceTypeVars, error) { return q.Vars, nil })
	if err != nil {
		a.EvalError = err.Error()
		return a
	}
	s := resolved[q.Resource]
	a.Value = &s
	return a
}
