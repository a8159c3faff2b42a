package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// incrementalPlan is what the issue-16 rows run: -only churn, coldstart, fanout (none of them by default:
// together they take most of an hour and a 100,000-policy lbplane).
type incrementalPlan struct {
	Churn      churnPlan `json:"churn,omitzero"`
	ColdCounts []int     `json:"coldStartPolicies,omitempty"`
	Fanout     []int     `json:"fanoutClients,omitempty"`
	// GRPCFleet: proxyless grpc-go clients of the gRPC fleet row (grpcfleet.go).
	GRPCFleet []int `json:"grpcFleetClients,omitempty"`
	// FanoutReplicas: the fan-out across replicas on etcd (-fanout-replicas, fanout_replicas.go).
	FanoutReplicas fanoutReplicasPlan `json:"fanoutReplicas,omitzero"`
	// FanoutRebalance: a replica restarted among others with a maximum connection age (-fanout-rebalance,
	// fanout_rebalance.go); FanoutChurn: clients coming and going under changes (-fanout-churn,
	// fanout_churn.go).
	FanoutRebalance rebalancePlan `json:"fanoutRebalance,omitzero"`
	FanoutChurn     churnRowPlan  `json:"fanoutChurn,omitzero"`
}

type churnFlags struct {
	policies, rate   *int
	duration         *time.Duration
	intervals        *string
	cold, fanoutList *string
	grpcFleet        *string
}

func churnFlagSet() churnFlags {
	return churnFlags{
		policies:   flag.Int("churn-policies", 1000, "Service-backed policies of the endpoint-churn row (-only churn)"),
		rate:       flag.Int("churn-rate", 100, "EndpointSlice writes per second of the endpoint-churn row"),
		duration:   flag.Duration("churn-duration", 60*time.Second, "length of the endpoint-churn row"),
		intervals:  flag.String("churn-endpoint-intervals", "50ms", "lbplane serve --endpoint-update-interval of each run of the endpoint-churn row, comma-separated (0: none)"),
		cold:       flag.String("cold-policies", "10000,50000,100000", "policy counts of the cold-start row (-only coldstart), each a fresh lbplane on a --config-dir"),
		fanoutList: flag.String("fanout", "1000,10000", "simulated delta clients of the fan-out row (-only fanout), each count a fresh lbplane"),
		grpcFleet:  flag.String("grpc-fleet", "1000", "grpc-go xDS clients of the gRPC fleet row (-only grpc-fleet), each count a fresh lbplane"),
	}
}

func (f churnFlags) apply(cfg *config) {
	cfg.Incremental.Churn = churnPlan{Policies: *f.policies, Rate: *f.rate, Duration: *f.duration}
	for _, v := range strings.Split(*f.intervals, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			fmt.Fprintf(os.Stderr, "error: -churn-endpoint-intervals: %q is not a duration of 0 or more\n", v)
			os.Exit(2)
		}
		cfg.Incremental.Churn.EndpointIntervals = append(cfg.Incremental.Churn.EndpointIntervals, d)
	}
	var err error
	if cfg.Incremental.ColdCounts, err = intList(*f.cold); err != nil {
		fmt.Fprintln(os.Stderr, "error: -cold-policies:", err)
		os.Exit(2)
	}
	if cfg.Incremental.Fanout, err = intList(*f.fanoutList); err != nil {
		fmt.Fprintln(os.Stderr, "error: -fanout:", err)
		os.Exit(2)
	}
	if cfg.Incremental.GRPCFleet, err = intList(*f.grpcFleet); err != nil {
		fmt.Fprintln(os.Stderr, "error: -grpc-fleet:", err)
		os.Exit(2)
	}
}

// incrementalOnly tells whether -only names nothing but these rows (which need Envoy and no other peer).
func incrementalOnly(only string) bool {
	if only == "" {
		return false
	}
	for _, s := range strings.Split(only, ",") {
		if s != "churn" && s != "coldstart" && s != "fanout" && s != "fanout-replicas" && s != "fanout-rebalance" && s != "fanout-churn" && s != "grpc-fleet" && s != "controlplane" && s != "gateway-routes" {
			return false
		}
	}
	return true
}

// incrementalRows runs the rows -only names explicitly; `make bench` (no -only) leaves them out.
func incrementalRows(ctx context.Context, e *env, cfg config, out, only string, record func(runRecord)) error {
	named := func(s string) bool { return strings.Contains(","+only+",", ","+s+",") }
	if named("churn") {
		for _, interval := range cfg.Incremental.Churn.EndpointIntervals {
			if err := endpointChurn(ctx, e, cfg.Incremental.Churn, interval, out, record); err != nil {
				return fmt.Errorf("endpoint churn: %w", err)
			}
		}
	}
	if named("coldstart") {
		if err := coldStarts(ctx, e, cfg.Incremental.ColdCounts, out, record); err != nil {
			return fmt.Errorf("cold start: %w", err)
		}
	}
	if named("fanout") {
		if err := fanOut(ctx, e, cfg.Incremental.Fanout, out, record); err != nil {
			return fmt.Errorf("fan-out: %w", err)
		}
	}
	if named("grpc-fleet") {
		if err := grpcFleet(ctx, e, cfg.Incremental.GRPCFleet, out, record); err != nil {
			return fmt.Errorf("gRPC fleet: %w", err)
		}
	}
	if cfg.Incremental.FanoutReplicas.Replicas > 0 { // opt-in: -fanout-replicas N
		if err := fanOutReplicas(ctx, e, cfg.Incremental.FanoutReplicas, record); err != nil {
			return fmt.Errorf("fan-out across replicas: %w", err)
		}
	}
	if len(cfg.Incremental.FanoutRebalance.Clients) > 0 { // opt-in: -fanout-rebalance N
		if err := fanOutRebalance(ctx, e, cfg.Incremental.FanoutRebalance, out, record); err != nil {
			return fmt.Errorf("fan-out rebalancing: %w", err)
		}
	}
	if len(cfg.Incremental.FanoutChurn.Clients) > 0 { // opt-in: -fanout-churn N
		if err := fanOutChurn(ctx, e, cfg.Incremental.FanoutChurn, out, record); err != nil {
			return fmt.Errorf("fan-out client churn: %w", err)
		}
	}
	return nil
}

// incrementalMarkdown is the report's part for the endpoint-churn, cold-start and fan-out rows.
func (r *report) incrementalMarkdown(w func(string, ...any)) {
	var churn, cold, fan, kube, grpcs []runRecord
	for _, run := range r.Runs {
		switch run.Scenario {
		case "propagation":
			if _, ok := run.Extra["statusWritesPerChange"]; ok {
				kube = append(kube, run)
			}
		case "churn":
			churn = append(churn, run)
		case "coldstart":
			if run.Extra != nil {
				cold = append(cold, run)
			}
		case "fanout":
			fan = append(fan, run)
		case "grpc-fleet":
			grpcs = append(grpcs, run)
		}
	}
	if len(kube) > 0 {
		w("\n## Status writes per change (Kubernetes rows)\n\nCounted by the API server (`apiserver_request_total`, status subresource, every write verb), from a settled count before the timed changes to a settled count after.\n\n| xDS | policies | changes | status writes per change |\n|---|---|---|---|\n")
		for _, k := range kube {
			w("| %s | %d | %d | %.2f |\n", k.API, k.Policies, len(k.Samples), k.Extra["statusWritesPerChange"])
		}
	}
	if len(churn) > 0 {
		w("\n## Endpoint churn through Kubernetes\n\nService-backed policies on a real kube-apiserver (with etcd); their EndpointSlices are written (an update of one slice, a new address each time) at a fixed rate, round robin. Lag from the write sent to its arrival: at an EDS client in the runner (a delta ADS stream subscribed to every cluster's endpoints: every change) and in the real Envoy (admin `/config_dump?resource=dynamic_endpoint_configs&include_eds&name_regex=^CLUSTER$`, that cluster's endpoints as Envoy holds them: the newest change, read until it shows, pausing as long as each read took, then the next newest: a sample). Status writes counted by the API server (`apiserver_request_total`, status subresource).\n\n")
		w("| policies | endpoint interval | writes/s (target) | writes | EDS lag p50 / p99 / max ms | Envoy lag p50 / p99 ms (samples) | lbplane CPU ms/change | lbplane core share | lbplane RSS MiB | status writes | unseen |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range churn {
			x := c.Extra
			w("| %d | %s | %.1f (%.0f) | %.0f | %.1f / %.1f / %.1f | %.1f / %.1f (%.0f) | %.2f | %.0f %% | %s | %.0f | %.0f |\n", c.Policies, churnInterval(c), x["achievedRate"], x["targetRate"], x["writes"],
				c.P50, c.P99, c.P999, x["envoyP50Ms"], x["envoyP99Ms"], x["envoySamples"], c.LbplaneCPUPerChangeMs, x["lbplaneCoreShare"]*100, mib(float64(c.LbplaneRSS)), x["statusWrites"], x["missing"])
		}
		w("\nThe storm as one client sees it: the EDS responses the runner's EDS client got while the writes went on, per second on average and in its busiest second (lbplane serve `--endpoint-update-interval` bounds them: one resync of endpoint changes alone per interval); and how long after the last write was acknowledged the EDS client had every change, and the Envoy every cluster's last address (its full EDS config dump, read until it does).\n\n| policies | endpoint interval | writes/s | EDS responses | per second | busiest second | EDS client has every change after ms | Envoy has every last address after ms |\n|---|---|---|---|---|---|---|---|\n")
		for _, c := range churn {
			x := c.Extra
			if _, ok := x["edsResponses"]; !ok {
				continue
			}
			w("| %d | %s | %.1f | %.0f | %.1f | %.0f | %.0f | %.0f |\n", c.Policies, churnInterval(c), x["achievedRate"], x["edsResponses"], x["edsResponsesPerSecond"], x["edsResponsesBusiestSecond"],
				x["convergedAfterMs"], x["envoyConvergedAfterMs"])
		}
	}
	if len(cold) > 0 {
		w("\n## Cold start\n\nlbplane started on a `--config-dir` holding N policies (files of 1,000), a fresh Envoy started at the same moment; from lbplane's start until the Envoy serves the last policy, and until the push API (`/v1/proxies`, what `lbctl status` shows) has that Envoy SYNCED.\n\n| policies | Envoy serves the last policy s | SYNCED s | lbplane CPU s | lbplane RSS MiB | valid |\n|---|---|---|---|---|---|\n")
		for _, c := range cold {
			w("| %d | %.1f | %.1f | %.1f | %s | %v %s |\n", c.Policies, c.Extra["servedMs"]/1000, c.Extra["syncedMs"]/1000, c.Extra["lbplaneCPUSeconds"], mib(float64(c.LbplaneRSS)), c.Valid, c.Note)
		}
	}
	if len(fan) > 0 {
		w("\n## Fan-out to simulated delta clients\n\nEach count in a fresh lbplane holding only the probe policy; simulated delta ADS clients in the runner's process (one gRPC connection each, subscribed to every cluster, acknowledging); one cluster change timed from the push sent to each client's receipt. RSS per client: (RSS with every client connected − RSS before the first) / clients.\n\n| clients | connect s | p50 ms | p99 ms | all ms | got it | lbplane CPU ms for the change | RSS idle → connected MiB | RSS per client KiB |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range fan {
			x := c.Extra
			w("| %d | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %s → %s | %.1f |\n", c.Conns, x["connectSeconds"], c.P50, c.P99, c.P999, x["got"], c.LbplaneCPUPerChangeMs, mib(x["idleRSS"]), mib(float64(c.LbplaneRSS)), x["rssPerClientKiB"])
		}
	}
	if len(grpcs) > 0 {
		w("\n## Proxyless gRPC clients\n\nEach count in a fresh lbplane as it ships (mTLS xDS) holding one gRPC policy over three backends; grpc-go xDS clients (`xds:///`, state of the world) in a process of their own, each its own node with a certificate from lbplane; %%d changes of the policy's endpoints, each timed from the push sent to the last client's acknowledgement as lbplane recorded it. RSS per client: (lbplane's RSS with every client SYNCED − its RSS before the first) / clients.\n\n| clients | connect s | every client acknowledged p50 / max ms | lbplane CPU ms per change | lbplane RSS idle → connected MiB | lbplane RSS per client KiB | the clients' RSS per client KiB | valid |\n|---|---|---|---|---|---|---|---|\n", grpcFleetChanges)
		for _, c := range grpcs {
			x := c.Extra
			w("| %d | %.1f | %.1f / %.1f | %.1f | %s → %s | %.1f | %.1f | %v %s |\n", c.Conns, x["connectSeconds"], c.P50, c.P999, c.LbplaneCPUPerChangeMs, mib(x["idleRSS"]), mib(float64(c.LbplaneRSS)), x["rssPerClientKiB"], x["fleetRSSPerClientKiB"], c.Valid, c.Note)
		}
	}
	r.fanoutReplicasMarkdown(w)
	r.rebalanceMarkdown(w)
	r.fanoutChurnMarkdown(w)
}

// churnInterval is the --endpoint-update-interval a churn run's lbplane had.
func churnInterval(c runRecord) string {
	ms, ok := c.Extra["endpointIntervalMs"]
	switch {
	case !ok:
		return "?"
	case ms == 0:
		return "none"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}
