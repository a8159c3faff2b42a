// Package lbctl holds the lbctl commands, one file each. Each command's RunE hands off to a plain function
// that writes to the command's output, so tests can run them without a process.
//
// # Output
//
// Every command that prints an answer takes the same -o flag set (printer.go): table (the default), wide,
// json, yaml, name, jsonpath=..., jsonpath-as-json=... and go-template=..., the machine formats through
// cli-runtime's printers, as kubectl prints them. A command adopts it in three steps:
//
//	out := addOutputFlags(cmd, "")          // when building the command; "" means table
//	if err := out.check(); err != nil {...} // first thing in RunE: an unknown -o fails before any call
//	return out.Print(cmd.OutOrStdout(), printable{Object: answer, Table: table, Names: names})
//
// printable.Object is printed by the machine formats (a policy or policy list keeps its kind; anything else
// is printed as its JSON). Table is a metav1.Table: columns with Priority 1 show only in -o wide; rows
// carrying their policy in Object get a NAMESPACE column with WithNamespace. Answers that are not rows give
// Text instead (it gets wide too). Names are the "kind/name" lines of -o name for answers that are not
// policies. Golden files per command and format live in testdata/output (go test ./internal/lbctl -run
// TestOutputGolden -update).
//
// # Watching
//
// watchFlags (watch.go) adds --watch to a command: it polls a fetch function, printing an answer only when
// it changed, until Ctrl-C, --watch-timeout or --watch-max.
//
// # Kubernetes mode
//
// With --kubeconfig or --context, g.client() returns a push API client that goes through a port-forward to
// an lbplane pod, with the token and CA read from the chart's Secrets; g.policies() reads the cluster's
// LoadBalancerPolicy objects; g.Connect() returns the whole Cluster (kube.go) for anything else.
package lbctl
