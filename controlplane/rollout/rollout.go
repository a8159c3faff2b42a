// Package rollout runs staged rollouts: a change of a policy reaches the Envoys of its proxy group in
// stages, each judged on the Envoys' own numbers before the next, and is rolled back on a breach.
//
// A rollout is per policy. Several policies of a group may be rolled out at once, each with its own
// stages, phase, bake, numbers and verdict, judged on its own clusters: one never judges, rolls back,
// supersedes or resets another. Their canaries are prefixes of one random order of the group's Envoys
// (canaries.go), so that an Envoy that is a canary of a policy at stage 2 and not of another at stage 1 runs
// one of a few views the engine builds (engine.SetSplit): the sources' policies with, in place of each
// policy it is not a canary of, that policy's baseline (the last generation every Envoy ran). After each
// stage's bake the canaries' requests, errors and p99 for the policy's clusters, read from their stats
// ports (proxystats), are compared with the other Envoys' over the same window, Envoy by Envoy, so that no
// single Envoy decides (JudgeStage). A NACK from most canaries is a breach at once. Too little traffic
// holds the stage.
//
// A newer staged push to a policy during its rollout supersedes it: its rollout starts again from the first
// stage with the newest generation as candidate and the baseline it had. A push that is not staged takes
// its policy out of its rollout: every Envoy gets it at once. The state is stored on every stage or phase
// change, one record per proxy group; a restart resumes each rollout at its stored stage, with the rest of
// its bake (the stored stage start is kept; the numbers judged are those read since the restart, and too
// few of them hold the stage), and keeps a rolled-back policy on its baseline.
//
// With a store several replicas share (etcd), every replica runs a Controller on the same stored state:
// each serves its own Envoys the side the state says and follows the others' writes (Reload); only the
// leader (Leader) judges and moves rollouts on. A write made over a state this replica had not read yet is
// refused by the store (store.ErrConflict): the state is read again and the change decided again.
package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Modes of a push (lbctl push-config --rollout) and of the server default (lbplane serve --rollout-default).
const (
	ModeStaged    = "staged"
	ModeImmediate = "immediate"
)

// Persist keeps rollouts across restarts (store.Store): one record per proxy group.
type Persist interface {
	Rollouts() (map[string][]byte, error)
	PutRollout(group string, v []byte) error
}

// Controller runs the rollouts. Safe for concurrent use.
type Controller struct {
	Engine *engine.Engine
	// Proxies are the connected Envoys; Histories what their stats ports said (nil: no stats are read, and
	// a stage holds for want of traffic).
	Proxies   func() []xdsserver.ProxyStatus
	Histories func() []proxystats.History
	Persist   Persist
	Log       *slog.Logger
	// Tick is how often rollouts are looked at (250 ms when 0).
	Tick time.Duration
	// Leader, when set, tells whether this replica judges and moves rollouts on (the others only serve
	// what the stored state says); nil: always.
	Leader func() bool
	// LeaderWrites: only the leader stores rollouts (Kubernetes mode, where every replica sees each spec
	// change at once). A follower serves its own decision on a change (the change is staged, with no
	// canary yet: the leader chooses them) until the leader's stored state covers it.
	LeaderWrites bool
	// MinCanaryAge is how long an Envoy must have been connected, acknowledging its config, before it is
	// chosen as a canary (DefaultMinCanaryAge when 0; negative: no minimum).
	MinCanaryAge time.Duration

	mu      sync.Mutex
	byGroup map[string]*group
	// held are the staged changes the sources already hold whose rollouts could not start (Stage): every
	// Envoy is kept from them until they start.
	held map[objkey.Key]*held
	// later: the splits set are published with the engine's next publish (Unstage); c.mu is held.
	later bool
	// judging is since when this replica judges (the first step as the leader): a canary's time to take a
	// candidate counts from then at the earliest, so that Envoys reconnecting after a restart or a
	// takeover are not taken for canaries that never answer.
	judging time.Time
}

// DefaultMinCanaryAge is how long an Envoy must have been connected and acknowledging its config before it
// may be a canary: one that has just connected (or connected to be chosen) is not.
const DefaultMinCanaryAge = 30 * time.Second

// PolicyRef is one policy of a rollout: the baseline every Envoy ran before (nil: the policy is new) and
// the candidate generation.
type PolicyRef struct {
	Namespace           string   `json:"namespace"`
	Name                string   `json:"name"`
	Baseline            *Version `json:"baseline,omitempty"`
	CandidateGeneration int64    `json:"candidateGeneration"`
	// Candidate is the generation rolled out (a traffic shift serves it with other weights); dropped once
	// the rollout succeeded.
	Candidate *Version `json:"candidate,omitempty"`
}

func (p PolicyRef) key() objkey.Key { return objkey.Key{Namespace: p.Namespace, Name: p.Name} }

// policy is one policy's rollout, as stored.
type policy struct {
	PolicyRef
	// Kind is KindTraffic for a traffic shift, empty for stages across Envoys.
	Kind         string           `json:"kind,omitempty"`
	Settings     v1alpha1.Rollout `json:"settings"`
	Stage        int              `json:"stage"` // from 0
	Phase        string           `json:"phase"`
	StageStarted time.Time        `json:"stageStarted"`
	// Took is when each canary was first seen running the candidate: acknowledging the config the engine
	// serves it, which carries the candidate (see took).
	Took map[string]time.Time `json:"took,omitempty"`
	// CandidateSince is when every canary of the stage ran the candidate: its bake and its numbers count
	// from then; zero while a canary has yet to take it.
	CandidateSince time.Time `json:"candidateSince,omitzero"`
	// Ended is when the rollout succeeded, rolled back or was aborted.
	Ended    time.Time `json:"ended,omitzero"`
	Canaries []string  `json:"canaries,omitempty"`
	// Extra are the canaries the stage took beyond its count, one each time its canaries could not decide.
	Extra int `json:"extra,omitempty"`
	// Flagged are the Envoys whose numbers were not believed during the rollout.
	Flagged         []string                 `json:"flagged,omitempty"`
	Message         string                   `json:"message"`
	Canary          *v1alpha1.RolloutNumbers `json:"canary,omitempty"`
	BaselineNumbers *v1alpha1.RolloutNumbers `json:"baselineNumbers,omitempty"`
	// Earlier is the other Envoys' numbers from the last stage that had enough of them: the last stage has
	// no other Envoys, and is compared with these.
	Earlier *v1alpha1.RolloutNumbers `json:"earlier,omitempty"`
}

// underWay tells whether the rollout is progressing or paused.
func (p *policy) underWay() bool {
	return p.Phase == v1alpha1.RolloutProgressing || p.Phase == v1alpha1.RolloutPaused
}

// stateVersion is the version of the stored record: 2 has a rollout per policy; a record without one is a
// group's single rollout of earlier versions, read as each of its policies' (decodeGroup).
const stateVersion = 2

// group is one proxy group's rollouts, as stored.
type group struct {
	Group   string `json:"group"`
	Version int    `json:"version"`
	// Order is the group's Envoys in a random order: each policy's canaries are its first Envoys.
	Order    []string  `json:"order,omitempty"`
	Policies []*policy `json:"policies"`
	// raw is the state as last read from the store (not stored).
	raw []byte
	// localSince, when set, is when this follower decided the state itself, not stored (LeaderWrites).
	localSince time.Time
	// missing is when each canary was last seen gone (not stored: a restart gives every canary the grace
	// again).
	missing map[string]time.Time
	// local are the candidate generations this follower decided to stage itself, by policy, until the
	// leader's stored state covers them (not stored).
	local map[objkey.Key]int64
}

func (g *group) find(k objkey.Key) *policy {
	for _, p := range g.Policies {
		if p.key() == k {
			return p
		}
	}
	return nil
}

// legacyGroup is the group-wide rollout a record of version 1 holds beside its policies.
type legacyGroup struct {
	Kind         string                   `json:"kind"`
	Settings     v1alpha1.Rollout         `json:"settings"`
	Stage        int                      `json:"stage"`
	Phase        string                   `json:"phase"`
	StageStarted time.Time                `json:"stageStarted"`
	Canaries     []string                 `json:"canaries"`
	Message      string                   `json:"message"`
	Canary       *v1alpha1.RolloutNumbers `json:"canary"`
	Baseline     *v1alpha1.RolloutNumbers `json:"baselineNumbers"`
	Earlier      *v1alpha1.RolloutNumbers `json:"earlier"`
}

// decodeGroup reads a stored record. One of version 1 (one rollout for the whole group) becomes a rollout
// per policy, each where the group's was, with its canaries first in the order.
func decodeGroup(v []byte) (*group, error) {
	g := &group{}
	if err := json.Unmarshal(v, g); err != nil {
		return nil, err
	}
	g.Policies = slices.DeleteFunc(g.Policies, func(p *policy) bool { return p == nil })
	if g.Version < stateVersion {
		var old legacyGroup
		if err := json.Unmarshal(v, &old); err != nil {
			return nil, err
		}
		for _, p := range g.Policies {
			p.Kind, p.Settings, p.Stage, p.Phase, p.StageStarted = old.Kind, *old.Settings.DeepCopy(), old.Stage, old.Phase, old.StageStarted
			p.Canaries, p.Message, p.Canary, p.BaselineNumbers, p.Earlier = slices.Clone(old.Canaries), old.Message, old.Canary, old.Baseline, old.Earlier
			if !p.underWay() {
				p.Ended = time.Now()
			}
		}
		g.Order, g.Version = slices.Clone(old.Canaries), stateVersion
	}
	for _, p := range g.Policies {
		if len(p.Settings.Stages) == 0 || p.Settings.Analysis == nil || p.Settings.BakeTime == nil {
			p.Settings = *v1alpha1.RolloutDefaulted(&p.Settings)
		}
	}
	return g, nil
}

// Change is one policy a push changed.
type Change struct {
	Key   objkey.Key
	Group string
	// Old is the policy before the change (nil: a new policy); New the one changed to, of Generation. Both are
	// the sources' typed policies, with their metadata, and are not modified.
	Old, New   *v1alpha1.LoadBalancerPolicy
	Generation int64
	// Rollout is the policy's spec.rollout (nil: the defaults).
	Rollout *v1alpha1.Rollout
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Load reads the stored rollouts and splits their groups again; call it before xDS is served. A
// progressing rollout keeps its stage's start: the bake goes on where it was, and the stage is judged on
// the stats read since (the history before the restart is gone; too few requests hold the stage).
func (c *Controller) Load() error {
	if c.Persist == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reload(true)
}

// Reload reads the stored rollouts again and serves what they say: with a shared store, another replica
// wrote them (a push there, an action, the leader moving a rollout on).
func (c *Controller) Reload() error {
	if c.Persist == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reload(false)
}

// reload is Reload with c.mu held; start says it is the first read, at start.
func (c *Controller) reload(start bool) error {
	all, err := c.Persist.Rollouts()
	if err != nil {
		return err
	}
	prev := c.byGroup
	c.byGroup = map[string]*group{}
	for name, v := range all {
		if old := prev[name]; old != nil && !start && string(old.raw) == string(v) {
			// Unchanged (this replica's own write, read back): keep it as it is, split and all.
			c.byGroup[name] = old
			continue
		}
		g, err := decodeGroup(v)
		if err != nil {
			return fmt.Errorf("stored rollouts of group %s: %w", name, err)
		}
		g.raw = v
		if old := prev[name]; old != nil {
			g.missing = old.missing
		}
		if start {
			for _, p := range g.Policies {
				if p.Phase == v1alpha1.RolloutProgressing {
					p.Message = fmt.Sprintf("resumed after a restart at stage %d of %d; judged at %s at the earliest, on the stats read since the restart",
						p.Stage+1, len(p.Settings.Stages), p.bakeFrom().Add(p.Settings.BakeTime.Duration).UTC().Format(time.RFC3339))
				}
			}
		}
		c.byGroup[name] = g
		if err := c.split(g); err != nil {
			return err
		}
		if start {
			c.log().Info("rollouts loaded", "group", name, "policies", g.keys())
		}
	}
	for name, old := range prev {
		if !old.localSince.IsZero() && !covers(c.byGroup[name], old) {
			// The leader has not stored this change's rollout yet: keep serving this replica's decision, for
			// as long as it takes (the leader holds a change it cannot stage; it never serves it unstaged).
			c.byGroup[name] = old
			if err := c.split(old); err != nil {
				return err
			}
			continue
		}
		if _, ok := c.byGroup[name]; !ok {
			c.setSplit(name, nil)
		}
	}
	// A held change whose rollout the store has (the leader started it) is served as the store says.
	for k, h := range c.held {
		if p, _ := c.find(k); p != nil && p.CandidateGeneration >= h.ch.Generation {
			delete(c.held, k)
			c.resplit(h.ch.Group)
		}
	}
	return nil
}

// covers tells whether stored has every policy this follower decided itself (local.local) at its
// candidate generation or later.
func covers(stored, local *group) bool {
	for k, gen := range local.local {
		var sp *policy
		if stored != nil {
			sp = stored.find(k)
		}
		if sp == nil || sp.CandidateGeneration < gen {
			return false
		}
	}
	return true
}

// follower tells whether this replica leaves storing rollouts to the leader.
func (c *Controller) follower() bool {
	return c.LeaderWrites && c.Leader != nil && !c.Leader()
}

// retry runs f, and once more after reading the stored state again when another replica wrote it in the
// meantime (store.ErrConflict); c.mu is held.
func (c *Controller) retry(f func() error) error {
	for try := 0; ; try++ {
		err := f()
		if !errors.Is(err, store.ErrConflict) || try == 3 {
			return err
		}
		if err := c.reload(false); err != nil {
			return err
		}
	}
}

func kindOf(r *v1alpha1.Rollout) string {
	if r != nil && r.TrafficShift != nil {
		return KindTraffic
	}
	return ""
}

// Check says why changes cannot start rollouts (nil when they can): a policy whose rollout is under way
// (progressing or paused) is superseded only by a change of the same kind, staged or traffic shift.
func (c *Controller) Check(changes []Change) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.check(changes)
}

// check is Check with c.mu held.
func (c *Controller) check(changes []Change) error {
	for _, ch := range changes {
		p, _ := c.find(ch.Key)
		if p == nil || !p.underWay() || p.Kind == kindOf(ch.Rollout) {
			continue
		}
		return fmt.Errorf("a %s of %s is under way; wait for it, or abort it (lbctl rollout abort), before a %s", kindName(p.Kind), ch.Key,
			kindName(kindOf(ch.Rollout)))
	}
	return nil
}

func kindName(kind string) string {
	if kind == KindTraffic {
		return "traffic shift"
	}
	return "staged rollout"
}

// Begin starts (or restarts, superseding the one under way) the rollouts of changes, one per policy; call
// it before the changes are stored and published, so that no Envoy but the canaries ever gets them, on
// this replica or any other sharing the store. Until the changes are stored the split serves no one
// anything new (the canaries run what the sources hold, the others the baseline, which are the same).
// undo puts back the rollouts as they were, for a push that was not stored after all.
func (c *Controller) Begin(changes []Change) (undo func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byGroup == nil {
		c.byGroup = map[string]*group{}
	}
	var before map[string][]byte
	var kept map[string]*group
	err = c.retry(func() error {
		before, kept = c.snapshot(), c.keep()
		return c.begin(changes, time.Now())
	})
	if err != nil {
		// Nothing was started: the push is refused.
		c.putBack(kept)
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if err := c.restore(before); err != nil {
			c.log().Error("putting the rollouts back after a push that was not stored", "error", err)
		}
	}, err
}

// snapshot is every group's state as stored; c.mu is held.
func (c *Controller) snapshot() map[string][]byte {
	out := map[string][]byte{}
	for name, g := range c.byGroup {
		v, _ := json.Marshal(g)
		out[name] = v
	}
	return out
}

// restore makes the states snapshot's again; c.mu is held.
func (c *Controller) restore(snap map[string][]byte) error {
	now := c.snapshot()
	for name := range now {
		if _, ok := snap[name]; !ok {
			delete(c.byGroup, name)
			c.setSplit(name, nil)
			if c.Persist != nil {
				if err := c.Persist.PutRollout(name, nil); err != nil {
					return err
				}
			}
		}
	}
	for name, v := range snap {
		if string(now[name]) == string(v) {
			continue
		}
		g, err := decodeGroup(v)
		if err != nil {
			return err
		}
		if old := c.byGroup[name]; old != nil {
			g.missing = old.missing
		}
		c.byGroup[name] = g
		if err := c.apply(g); err != nil {
			return err
		}
	}
	return nil
}

// begin is Begin with c.mu held.
func (c *Controller) begin(changes []Change, now time.Time) error {
	byGroup := map[string][]Change{}
	for _, ch := range changes {
		if err := c.dropElsewhere(ch.Key, ch.Group); err != nil {
			return err
		}
		byGroup[ch.Group] = append(byGroup[ch.Group], ch)
	}
	for _, name := range slices.Sorted(maps.Keys(byGroup)) {
		g := c.byGroup[name]
		if g == nil {
			g = &group{Group: name, Version: stateVersion}
			c.byGroup[name] = g
		}
		var started []*policy
		for _, ch := range byGroup[name] {
			p := g.find(ch.Key)
			if p != nil && c.follower() && p.Phase != "" && p.CandidateGeneration >= ch.Generation {
				// The leader stored this generation's rollout before this replica saw it: it stands.
				continue
			}
			if p == nil {
				p = &policy{PolicyRef: PolicyRef{Namespace: ch.Key.Namespace, Name: ch.Key.Name}}
				g.Policies = append(g.Policies, p)
			}
			superseded := p.Phase != "" && p.Phase != v1alpha1.RolloutSucceeded
			p.Baseline = baselineOf(p, ch.Old)
			if c.follower() {
				if g.local == nil {
					g.local = map[objkey.Key]int64{}
				}
				g.local[ch.Key] = ch.Generation
			}
			p.CandidateGeneration, p.Candidate = ch.Generation, VersionOf(ch.New)
			p.Settings, p.Kind = *v1alpha1.RolloutDefaulted(ch.Rollout), kindOf(ch.Rollout)
			p.Stage, p.Phase, p.StageStarted, p.Ended, p.Canaries, p.Extra, p.Flagged = 0, v1alpha1.RolloutProgressing, now, time.Time{}, nil, 0, nil
			p.Took, p.CandidateSince = nil, time.Time{}
			p.Canary, p.BaselineNumbers, p.Earlier = nil, nil, nil
			p.Message = "starting"
			started = append(started, p)
			if superseded {
				p.Message = "a newer generation superseded the rollout under way; starting again from stage 1"
			}
		}
		var eligible []string
		if c.follower() {
			for _, p := range started {
				if p.Kind != KindTraffic {
					p.Message = "waiting for the elected replica to choose the canaries"
				}
			}
		} else {
			proxies := c.Proxies()
			nodes := g.present(nodesOf(proxies, name), now)
			eligible = c.eligible(proxies, name, now)
			c.keepOrder(g, nodes, eligible, started)
			for _, p := range started {
				if p.Kind != KindTraffic {
					c.place(g, p, nodes)
					line := c.stageLine(p, len(nodes))
					if p.Message != "starting" {
						line = p.Message + "; " + line
					}
					p.Message = line
				}
			}
		}
		if len(started) == 0 {
			continue
		}
		for _, p := range started {
			c.log().Info("rollout started", "group", name, "policy", p.key().String(), "generation", p.CandidateGeneration, "canaries", p.Canaries,
				"eligible", eligible, "message", p.Message)
		}
		if err := c.apply(g); err != nil {
			return err
		}
	}
	return nil
}

// Unstage takes policies out of their rollouts: a push that is not staged, or a delete. The Envoys are
// served the change with the engine's next publish, which the caller makes with the policies' new versions
// (or without them): until then they keep what they run, never the candidate a rollout rolled back.
func (c *Controller) Unstage(keys []objkey.Key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.later = true
	defer func() { c.later = false }()
	c.unhold(keys)
	return c.retry(func() error {
		for _, k := range keys {
			if err := c.dropElsewhere(k, ""); err != nil {
				return err
			}
		}
		return nil
	})
}

// dropElsewhere removes k from the rollouts of any group but keep; c.mu is held.
func (c *Controller) dropElsewhere(k objkey.Key, keep string) error {
	for name, g := range c.byGroup {
		if name == keep {
			continue
		}
		i := slices.IndexFunc(g.Policies, func(p *policy) bool { return p.key() == k })
		if i < 0 {
			continue
		}
		g.Policies = slices.Delete(g.Policies, i, i+1)
		delete(g.local, k)
		if err := c.apply(g); err != nil {
			return err
		}
	}
	return nil
}

func (g *group) keys() []string {
	var out []string
	for _, p := range g.Policies {
		out = append(out, p.key().String())
	}
	return out
}

// apply stores g and then sets the engine's split for it (a state another replica changed meanwhile is
// refused by a shared store, and then nothing is served from it); a group with no rollout left is removed.
// c.mu is held.
func (c *Controller) apply(g *group) error {
	if len(g.Policies) == 0 {
		delete(c.byGroup, g.Group)
		c.setSplit(g.Group, nil)
		if c.Persist != nil && !c.follower() {
			return c.Persist.PutRollout(g.Group, nil)
		}
		return nil
	}
	if c.follower() {
		if g.localSince.IsZero() {
			g.localSince = time.Now()
		}
		return c.split(g)
	}
	g.localSince, g.local = time.Time{}, nil
	if c.Persist != nil {
		v, err := json.Marshal(g)
		if err != nil {
			return err
		}
		if err := c.Persist.PutRollout(g.Group, v); err != nil {
			return err
		}
		g.raw = v
	}
	return c.split(g)
}

// split sets the engine's split for g; c.mu is held.
func (c *Controller) split(g *group) error {
	sp := &engine.Split{Policies: map[objkey.Key]engine.PolicySplit{}}
	for _, p := range g.Policies {
		if p.Phase == v1alpha1.RolloutSucceeded {
			continue
		}
		var ps engine.PolicySplit
		if p.Baseline != nil {
			ps.Baseline = p.Baseline.Policy()
		}
		switch {
		case p.Kind == KindTraffic && p.underWay() && p.Candidate != nil:
			// Every Envoy runs the candidate with the step's weights.
			ps.Baseline = Shift(p.Candidate.Policy(), ps.Baseline, p.Settings.TrafficShift.Backend, p.Settings.TrafficShift.Steps[p.Stage])
		case p.Kind != KindTraffic && p.underWay():
			ps.Canaries = map[string]bool{}
			for _, n := range p.Canaries {
				ps.Canaries[n] = true
			}
		}
		sp.Policies[p.key()] = ps
	}
	if len(sp.Policies) == 0 {
		sp = nil
	}
	c.setSplit(g.Group, sp)
	return nil
}

// setSplit hands group's split, with its held changes (withHeld), to the engine, now or with its next
// publish (later); c.mu is held.
func (c *Controller) setSplit(group string, sp *engine.Split) {
	sp = c.withHeld(group, sp)
	if c.later {
		c.Engine.SetSplitLater(group, sp)
		return
	}
	c.Engine.SetSplit(group, sp)
}

// Run looks at every rollout every Tick until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	tick := c.Tick
	if tick <= 0 {
		tick = 250 * time.Millisecond
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.step(time.Now())
		}
	}
}

// Status returns the rollout status of policy k, nil when it has none.
func (c *Controller) Status(k objkey.Key) *v1alpha1.RolloutStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, _ := c.find(k)
	h := c.held[k]
	if p == nil {
		if h != nil {
			return c.heldStatus(h, nil, nil)
		}
		return nil
	}
	out := c.status(p)
	if h != nil {
		return c.heldStatus(h, p, out)
	}
	return out
}

// status is policy p's rollout status; c.mu is held.
func (c *Controller) status(p *policy) *v1alpha1.RolloutStatus {
	out := &v1alpha1.RolloutStatus{Phase: p.Phase, Stage: int32(p.Stage + 1), Stages: int32(len(p.Settings.Stages)),
		CandidateGeneration: p.CandidateGeneration, Canaries: slices.Clone(p.Canaries), Flagged: slices.Clone(p.Flagged), Message: p.Message}
	if p.Baseline != nil {
		out.BaselineGeneration = p.Baseline.Generation
	}
	if ts := p.Settings.TrafficShift; p.Kind == KindTraffic && ts != nil {
		out.TrafficBackend = ts.Backend
		out.Canaries = nil
		switch p.Phase {
		case v1alpha1.RolloutProgressing, v1alpha1.RolloutPaused:
			out.TrafficPercent = ptr(ts.Steps[p.Stage])
		case v1alpha1.RolloutRolledBack, v1alpha1.RolloutAborted:
			out.TrafficPercent = ptr(int32(0))
		}
	}
	if !p.underWay() {
		out.Canaries = nil
	}
	if len(out.Canaries) > 64 {
		out.Canaries = out.Canaries[:64]
	}
	if len(out.Flagged) > 64 {
		out.Flagged = out.Flagged[:64]
	}
	if !p.StageStarted.IsZero() {
		t := metav1.NewTime(p.StageStarted.UTC())
		out.StageStarted = &t
	}
	if !p.CandidateSince.IsZero() && p.underWay() && p.Kind != KindTraffic {
		t := metav1.NewTime(p.CandidateSince.UTC())
		out.CandidateSince = &t
	}
	if p.Canary != nil {
		n := *p.Canary
		out.Canary = &n
	}
	if p.BaselineNumbers != nil {
		n := *p.BaselineNumbers
		out.Baseline = &n
	}
	return out
}

// find returns policy k's rollout and its group; c.mu is held.
func (c *Controller) find(k objkey.Key) (*policy, *group) {
	for _, g := range c.byGroup {
		if p := g.find(k); p != nil {
			return p, g
		}
	}
	return nil, nil
}

// Keys are the policies in a rollout (ended ones included, as they are still reported).
func (c *Controller) Keys() []objkey.Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []objkey.Key
	for _, g := range c.byGroup {
		for _, p := range g.Policies {
			out = append(out, p.key())
		}
	}
	for k := range c.held {
		if p, _ := c.find(k); p == nil {
			out = append(out, k)
		}
	}
	return out
}

// ErrNoRollout is returned for a policy without a rollout.
var ErrNoRollout = fmt.Errorf("the policy has no staged rollout")

// Action is pause, resume or abort of policy k's rollout (undo is a push of the baseline: see Baseline).
// It acts on that policy's rollout alone.
func (c *Controller) Action(k objkey.Key, action string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retry(func() error { return c.action(k, action, time.Now()) })
}

// action is Action with c.mu held.
func (c *Controller) action(k objkey.Key, action string, now time.Time) error {
	p, g := c.find(k)
	if p == nil {
		return ErrNoRollout
	}
	n := len(p.Settings.Stages)
	switch action {
	case "pause":
		if p.Phase != v1alpha1.RolloutProgressing {
			return fmt.Errorf("the rollout is %s; only a progressing rollout can be paused", p.Phase)
		}
		p.Phase, p.Message = v1alpha1.RolloutPaused, fmt.Sprintf("paused at stage %d of %d", p.Stage+1, n)
	case "resume":
		switch p.Phase {
		case v1alpha1.RolloutPaused:
			p.Message = fmt.Sprintf("resumed at stage %d of %d", p.Stage+1, n)
		case v1alpha1.RolloutRolledBack, v1alpha1.RolloutAborted:
			// A retry: from the first stage, with the same candidate.
			p.Stage, p.Canaries, p.Extra, p.Earlier, p.Ended, p.Took = 0, nil, 0, nil, time.Time{}, nil
			p.Message = "retried from stage 1"
			if p.Kind != KindTraffic && !c.follower() {
				proxies := c.Proxies()
				nodes := g.present(nodesOf(proxies, g.Group), now)
				c.keepOrder(g, nodes, c.eligible(proxies, g.Group, now), []*policy{p})
				c.place(g, p, nodes)
			}
		default:
			return fmt.Errorf("the rollout is %s; only a paused, rolled back or aborted rollout can be resumed", p.Phase)
		}
		p.Phase = v1alpha1.RolloutProgressing
		p.newStage(now)
	case "abort":
		if !p.underWay() {
			return fmt.Errorf("the rollout is %s; only a progressing or paused rollout can be aborted", p.Phase)
		}
		c.rollBack(g, p, v1alpha1.RolloutAborted, fmt.Sprintf("aborted by an operator at stage %d of %d", p.Stage+1, n), now)
	default:
		return fmt.Errorf("unknown action %q: pause, resume, abort or undo", action)
	}
	return c.apply(g)
}

// rollBack puts every Envoy back on p's baseline (stored by the caller, with apply).
func (c *Controller) rollBack(g *group, p *policy, phase, msg string, now time.Time) {
	p.Phase, p.Message, p.Ended = phase, msg, now
	p.Took, p.CandidateSince = nil, time.Time{} // the canaries go back to the baseline
	c.log().Warn("rollout rolled back", "group", g.Group, "policy", p.key().String(), "phase", phase, "reason", msg)
}

// Baseline returns the baseline of policy k's rollout (nil when the policy was new), for undo.
func (c *Controller) Baseline(k objkey.Key) (*v1alpha1.LoadBalancerPolicy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, _ := c.find(k)
	if p == nil {
		return nil, ErrNoRollout
	}
	if p.Baseline == nil {
		return nil, nil
	}
	return p.Baseline.Policy(), nil
}
