package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// fleet is what the rows across replicas start before their simulated clients: a fresh etcd, R replicas of
// lbplane serve --store etcd on it, each with the probe policy, and the runner pinned off lbplane's CPU.
type fleet struct {
	sotw  bool   // the simulated clients ask state of the world (else delta)
	dir   string // the row's directory: etcd's and every replica's logs
	pin   *pinning
	reps  []*fanoutReplica
	addrs []string // every replica's xDS address, replica r's at r
	pids  []int    // the pid of every replica's lbplane as first started, replica r's at r
	// book: the version book of the probe policy's changes, begun with the version the replicas start at
	// (nil unless fleetOptions.book).
	book *versionBook

	undo []func()
}

type fleetOptions struct {
	row      string // the row's directory is row-R-n under the runner's
	api      string // swarmAPI's name of the clients' xDS API
	replicas int
	clients  int
	// replica: how every replica is started; etcd and pin are the fleet's.
	replica replicaOptions
	// book: begin a version book with the version the replicas have once they all have the probe policy.
	book bool
	// idle, when set, runs once every replica has the probe policy and before the runner pins itself: the
	// replicas with their config and no client yet.
	idle func(reps []*fanoutReplica)
}

// startFleet starts a fleet for o. On an error what it had started is stopped again; else the row stops
// it with close, after its clients.
func startFleet(ctx context.Context, e *env, o fleetOptions) (*fleet, error) {
	f := &fleet{}
	if err := f.start(ctx, e, o); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

func (f *fleet) start(ctx context.Context, e *env, o fleetOptions) error {
	sotw, err := swarmAPI(o.api)
	if err != nil {
		return err
	}
	f.sotw = sotw
	f.dir = filepath.Join(e.dir, fmt.Sprintf("%s-%d-%d", o.row, o.replicas, o.clients))
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return err
	}
	etcdArgs, stopEtcd, err := startEtcdStore(f.dir)
	if err != nil {
		return err
	}
	f.undo = append(f.undo, stopEtcd)
	if f.pin, err = pinCPUs(); err != nil {
		return err
	}
	ro := o.replica
	ro.etcd, ro.pin = etcdArgs, f.pin
	if f.reps, err = startFanoutReplicas(e, f.dir, o.replicas, ro); err != nil {
		return err
	}
	reps := f.reps
	f.undo = append(f.undo, func() { stopReplicas(reps) })
	if _, err := f.reps[0].c.Apply(ctx, probe("28091", 1), false); err != nil {
		return err
	}
	// Every replica has loaded it from etcd.
	if err := replicasHaveProbe(ctx, f.reps); err != nil {
		return err
	}
	if o.book {
		f.book = newVersionBook()
		v, err := groupVersion(ctx, f.reps[0])
		if err != nil {
			return err
		}
		f.book.initial(v)
	}
	if o.idle != nil {
		o.idle(f.reps)
	}
	// The runner (and the simulated clients in it) keeps off lbplane's CPU, and its Go scheduler to the
	// CPUs it has, until the row is done.
	if err := f.pin.self(pinOwn(f.pin)); err != nil {
		return err
	}
	all := pinAll(f.pin)
	f.undo = append(f.undo, func() { f.pin.self(all) })
	if f.pin != nil {
		procs := runtime.GOMAXPROCS(runtime.NumCPU() - 1)
		f.undo = append(f.undo, func() { runtime.GOMAXPROCS(procs) })
	}
	for _, r := range f.reps {
		f.addrs = append(f.addrs, r.xds)
		f.pids = append(f.pids, r.pid())
	}
	return nil
}

// close undoes what the fleet started, last first: the runner's CPUs and GOMAXPROCS, the replicas, etcd.
func (f *fleet) close() {
	for i := len(f.undo) - 1; i >= 0; i-- {
		f.undo[i]()
	}
	f.undo = nil
}
