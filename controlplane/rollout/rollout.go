// Package rollout runs staged rollouts: a change of a policy reaches the Envoys of its proxy group in
// stages, each judged on the Envoys' own numbers before the next, and is rolled back on a breach.
//
// A rollout is per proxy group. During one, the engine serves the group split (engine.SetSplit): the canary
// Envoys run what the sources hold (the candidate), the others the same policies with each rolled-out
// policy's baseline in its place (the last generation every Envoy ran). After each stage's bake time the
// canaries' requests, errors and p99 for the rolled-out policies' clusters, read from their stats ports
// (proxystats), are compared with the other Envoys' over the same window (judge). A NACK from a canary is
// a breach at once. Too little traffic holds the stage.
//
// A newer staged push to a policy of the group during a rollout supersedes it: the rollout starts again
// from the first stage with the newest generation as candidate, and each policy keeps the baseline it had
// (the last generation every Envoy ran). A push that is not staged takes its policy out of the rollout:
// every Envoy gets it at once. The state is stored on every stage or phase change; a restart resumes a
// rollout at the stored stage, with the rest of its bake (the stored stage start is kept; the numbers
// judged are those read since the restart, and too few of them hold the stage), and keeps a rolled-back
// group on its baseline.
//
// With a store several replicas share (etcd), every replica runs a Controller on the same stored state:
// each serves its own Envoys the side the state says and follows the others' writes (Reload); only the
// leader (Leader) judges and moves rollouts on. A write made over a state this replica had not read yet is
// refused by the store (store.ErrConflict): the state is read again and the change decided again.
package rollout

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Modes of a push (lbctl push-config --rollout) and of the server default (lbplane serve --rollout-default).
const (
	ModeStaged    = "staged"
	ModeImmediate = "immediate"
)

// Persist keeps rollouts across restarts (store.Store).
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
	// Decode turns a stored record into its policy (pushapi.PolicyOf).
	Decode func(*store.Record) (*v1alpha1.LoadBalancerPolicy, error)
	Log    *slog.Logger
	// Tick is how often rollouts are looked at (250 ms when 0).
	Tick time.Duration
	// Leader, when set, tells whether this replica judges and moves rollouts on (the others only serve
	// what the stored state says); nil: always.
	Leader func() bool
	// LeaderWrites: only the leader stores rollouts (Kubernetes mode, where every replica sees each spec
	// change at once). A follower serves its own decision on a change (the same the leader makes, from the
	// same inputs) until the leader's stored state covers it, or for at most LocalHold.
	LeaderWrites bool

	mu      sync.Mutex
	byGroup map[string]*state
}

// PolicyRef is one policy of a rollout: the baseline every Envoy ran before (nil: the policy is new) and
// the candidate generation.
type PolicyRef struct {
	Namespace           string        `json:"namespace"`
	Name                string        `json:"name"`
	Baseline            *store.Record `json:"baseline,omitempty"`
	CandidateGeneration int64         `json:"candidateGeneration"`
	// Candidate is the generation rolled out, for a traffic shift (which serves it with other weights).
	Candidate *store.Record `json:"candidate,omitempty"`
}

func (p PolicyRef) key() translate.Key { return translate.Key{Namespace: p.Namespace, Name: p.Name} }

// state is one group's rollout, as stored.
type state struct {
	Group string `json:"group"`
	// Kind is KindTraffic for a traffic shift, empty for stages across Envoys.
	Kind         string                   `json:"kind,omitempty"`
	Policies     []PolicyRef              `json:"policies"`
	Settings     v1alpha1.Rollout         `json:"settings"`
	Stage        int                      `json:"stage"` // from 0
	Phase        string                   `json:"phase"`
	StageStarted time.Time                `json:"stageStarted"`
	Canaries     []string                 `json:"canaries,omitempty"`
	Message      string                   `json:"message"`
	Canary       *v1alpha1.RolloutNumbers `json:"canary,omitempty"`
	Baseline     *v1alpha1.RolloutNumbers `json:"baselineNumbers,omitempty"`
	// raw is the state as last read from the store (not stored).
	raw []byte
	// localSince, when set, is when this follower decided the state itself, not stored (LeaderWrites).
	localSince time.Time
	// missing is when each canary was last seen gone (not stored: a restart gives every canary the grace
	// again).
	missing map[string]time.Time
	// Earlier is the other Envoys' numbers from the last stage that had enough of them: the last stage has
	// no other Envoys, and is compared with these.
	Earlier *v1alpha1.RolloutNumbers `json:"earlier,omitempty"`
}

// Change is one policy a push changed.
type Change struct {
	Key   translate.Key
	Group string
	// Old is the stored record before the push (nil: a new policy); New the one pushed, of Generation.
	Old, New   *store.Record
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
	c.byGroup = map[string]*state{}
	for group, v := range all {
		s := &state{}
		if err := json.Unmarshal(v, s); err != nil {
			return fmt.Errorf("stored rollout of group %s: %w", group, err)
		}
		s.raw = v
		if old := prev[group]; old != nil {
			s.missing = old.missing
			if !start && string(old.raw) == string(v) {
				// Unchanged (this replica's own write, read back): keep it as it is, split and all.
				c.byGroup[group] = old
				continue
			}
		}
		if start && s.Phase == v1alpha1.RolloutProgressing {
			s.Message = fmt.Sprintf("resumed after a restart at stage %d of %d; judged at %s at the earliest, on the stats read since the restart",
				s.Stage+1, len(s.Settings.Stages), s.StageStarted.Add(s.Settings.BakeTime.Duration).UTC().Format(time.RFC3339))
		}
		c.byGroup[group] = s
		if err := c.split(s); err != nil {
			return err
		}
		if start {
			c.log().Info("rollout loaded", "group", group, "phase", s.Phase, "stage", s.Stage+1, "canaries", s.Canaries, "stageStarted", s.StageStarted)
		}
	}
	for group, old := range prev {
		if !old.localSince.IsZero() && time.Since(old.localSince) < LocalHold && !covers(c.byGroup[group], old) {
			// The leader has not stored this change's rollout yet: keep serving this replica's decision.
			c.byGroup[group] = old
			if err := c.split(old); err != nil {
				return err
			}
			continue
		}
		if _, ok := c.byGroup[group]; !ok {
			c.Engine.SetSplit(group, nil)
		}
	}
	return nil
}

// LocalHold bounds how long a follower serves a rollout the leader has not stored (LeaderWrites): a leader
// that decided otherwise (it could not stage the change) is followed after it.
const LocalHold = 15 * time.Second

// covers tells whether stored has every policy of local at its candidate generation or later.
func covers(stored, local *state) bool {
	if stored == nil {
		return false
	}
	for _, lp := range local.Policies {
		i := slices.IndexFunc(stored.Policies, func(p PolicyRef) bool { return p.key() == lp.key() })
		if i < 0 || stored.Policies[i].CandidateGeneration < lp.CandidateGeneration {
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

// Check says why changes cannot start rollouts (nil when they can): a group runs one kind of rollout at a
// time, and a traffic shift moves one policy. A rollout that ended (succeeded, rolled back, aborted) is
// superseded by any; one under way only by a change of its own kind, and a traffic shift only by a change
// of its own policy.
func (c *Controller) Check(changes []Change) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	byGroup := map[string][]Change{}
	for _, ch := range changes {
		byGroup[ch.Group] = append(byGroup[ch.Group], ch)
	}
	for group, chs := range byGroup {
		kind := kindOf(chs[len(chs)-1].Rollout)
		for _, ch := range chs {
			if kindOf(ch.Rollout) != kind {
				return fmt.Errorf("group %s: %s and %s cannot roll out together: one has spec.rollout.trafficShift and the other not; push them apart", group, chs[0].Key, ch.Key)
			}
		}
		if kind == KindTraffic && len(chs) > 1 {
			return fmt.Errorf("group %s: a traffic shift moves one policy at a time; %s and %s were pushed together", group, chs[0].Key, chs[1].Key)
		}
		s := c.byGroup[group]
		if s == nil || s.Phase == v1alpha1.RolloutSucceeded {
			continue
		}
		under := s.Phase == v1alpha1.RolloutProgressing || s.Phase == v1alpha1.RolloutPaused
		if under && s.Kind != kind {
			return fmt.Errorf("group %s: a %s of %s is under way; wait for it, or abort it (lbctl rollout abort), before a %s", group,
				kindName(s.Kind), strings.Join(s.keys(), ", "), kindName(kind))
		}
		if kind == KindTraffic {
			for _, p := range s.Policies {
				if p.key() != chs[0].Key {
					return fmt.Errorf("group %s: the rollout of %s is not over (%s); a traffic shift of %s must wait until it is (lbctl rollout undo, or push it again)",
						group, p.key(), s.Phase, chs[0].Key)
				}
			}
		}
	}
	return nil
}

func kindName(kind string) string {
	if kind == KindTraffic {
		return "traffic shift"
	}
	return "staged rollout"
}

// Begin starts (or restarts, superseding the one under way) the rollout of changes, one group at a
// time; call it before the changes are stored and published, so that no Envoy but the canaries ever gets
// them, on this replica or any other sharing the store. Until the changes are stored the split serves no
// one anything new (the canaries run what the sources hold, the others the baseline, which are the same).
// undo puts back the rollouts as they were, for a push that was not stored after all.
func (c *Controller) Begin(changes []Change) (undo func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byGroup == nil {
		c.byGroup = map[string]*state{}
	}
	var before map[string][]byte
	err = c.retry(func() error {
		before = c.snapshot()
		return c.begin(changes)
	})
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
	for group, s := range c.byGroup {
		v, _ := json.Marshal(s)
		out[group] = v
	}
	return out
}

// restore makes the states snapshot's again; c.mu is held.
func (c *Controller) restore(snap map[string][]byte) error {
	now := c.snapshot()
	for group := range now {
		if _, ok := snap[group]; !ok {
			delete(c.byGroup, group)
			c.Engine.SetSplit(group, nil)
			if c.Persist != nil {
				if err := c.Persist.PutRollout(group, nil); err != nil {
					return err
				}
			}
		}
	}
	for group, v := range snap {
		if string(now[group]) == string(v) {
			continue
		}
		s := &state{}
		if err := json.Unmarshal(v, s); err != nil {
			return err
		}
		c.byGroup[group] = s
		if err := c.apply(s); err != nil {
			return err
		}
	}
	return nil
}

// begin is Begin with c.mu held.
func (c *Controller) begin(changes []Change) error {
	byGroup := map[string][]Change{}
	for _, ch := range changes {
		c.dropElsewhere(ch.Key, ch.Group)
		byGroup[ch.Group] = append(byGroup[ch.Group], ch)
	}
	for _, group := range slices.Sorted(maps.Keys(byGroup)) {
		s := c.byGroup[group]
		if s == nil || s.Phase == v1alpha1.RolloutSucceeded {
			s = &state{Group: group}
		}
		for _, ch := range byGroup[group] {
			i := slices.IndexFunc(s.Policies, func(p PolicyRef) bool { return p.key() == ch.Key })
			if i < 0 {
				s.Policies = append(s.Policies, PolicyRef{Namespace: ch.Key.Namespace, Name: ch.Key.Name, Baseline: ch.Old})
				i = len(s.Policies) - 1
			}
			s.Policies[i].CandidateGeneration, s.Policies[i].Candidate = ch.Generation, ch.New
			s.Settings = *v1alpha1.RolloutDefaulted(ch.Rollout)
			s.Kind = kindOf(ch.Rollout)
		}
		superseded := s.Phase != ""
		s.Stage, s.Phase, s.StageStarted, s.Canaries = 0, v1alpha1.RolloutProgressing, time.Now(), nil
		s.Canary, s.Baseline, s.Earlier = nil, nil, nil
		s.Message = "starting"
		if superseded {
			s.Message = "a newer generation superseded the rollout under way; starting again from stage 1"
		}
		c.byGroup[group] = s
		if s.Kind != KindTraffic {
			c.placeCanaries(s, c.nodes(group))
		}
		if err := c.apply(s); err != nil {
			return err
		}
		c.log().Info("rollout started", "group", group, "policies", s.keys(), "canaries", s.Canaries, "superseded", superseded)
	}
	return nil
}

// Unstage takes policies out of their rollouts: a push that is not staged, or a delete. A rollout left
// with no policy ends.
func (c *Controller) Unstage(keys []translate.Key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retry(func() error {
		for _, k := range keys {
			if err := c.dropElsewhere(k, ""); err != nil {
				return err
			}
		}
		return nil
	})
}

// dropElsewhere removes k from the rollout of any group but keep; c.mu is held.
func (c *Controller) dropElsewhere(k translate.Key, keep string) error {
	for group, s := range c.byGroup {
		if group == keep {
			continue
		}
		i := slices.IndexFunc(s.Policies, func(p PolicyRef) bool { return p.key() == k })
		if i < 0 {
			continue
		}
		s.Policies = slices.Delete(s.Policies, i, i+1)
		if len(s.Policies) == 0 {
			delete(c.byGroup, group)
			c.Engine.SetSplit(group, nil)
			if c.Persist != nil && !c.follower() {
				if err := c.Persist.PutRollout(group, nil); err != nil {
					return err
				}
			}
			continue
		}
		if err := c.apply(s); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) keys() []string {
	var out []string
	for _, p := range s.Policies {
		out = append(out, p.key().String())
	}
	return out
}

// apply stores s and then sets the engine's split for it (a state another replica changed meanwhile is
// refused by a shared store, and then nothing is served from it); c.mu is held.
func (c *Controller) apply(s *state) error {
	if c.follower() {
		if s.localSince.IsZero() {
			s.localSince = time.Now()
		}
		return c.split(s)
	}
	s.localSince = time.Time{}
	if c.Persist != nil {
		v, err := json.Marshal(s)
		if err != nil {
			return err
		}
		if err := c.Persist.PutRollout(s.Group, v); err != nil {
			return err
		}
		s.raw = v
	}
	return c.split(s)
}

// split sets the engine's split for s; c.mu is held.
func (c *Controller) split(s *state) error {
	switch s.Phase {
	case v1alpha1.RolloutSucceeded:
		c.Engine.SetSplit(s.Group, nil)
	default:
		split := &engine.Split{Baseline: map[translate.Key]*v1alpha1.LoadBalancerPolicy{}, Canaries: map[string]bool{}}
		for _, p := range s.Policies {
			var base *v1alpha1.LoadBalancerPolicy
			if p.Baseline != nil {
				b, err := c.Decode(p.Baseline)
				if err != nil {
					return err
				}
				base = b
			}
			split.Baseline[p.key()] = base
			if s.Kind == KindTraffic && (s.Phase == v1alpha1.RolloutProgressing || s.Phase == v1alpha1.RolloutPaused) && p.Candidate != nil {
				// Every Envoy runs the candidate with the step's weights.
				cand, err := c.Decode(p.Candidate)
				if err != nil {
					return err
				}
				split.Baseline[p.key()] = Shift(cand, base, s.Settings.TrafficShift.Backend, s.Settings.TrafficShift.Steps[s.Stage])
			}
		}
		if s.Kind != KindTraffic && (s.Phase == v1alpha1.RolloutProgressing || s.Phase == v1alpha1.RolloutPaused) {
			for _, n := range s.Canaries {
				split.Canaries[n] = true
			}
		}
		c.Engine.SetSplit(s.Group, split)
	}
	return nil
}

// nodes are the node ids of the group's connected Envoys, sorted.
func (c *Controller) nodes(group string) []string {
	var out []string
	for _, p := range c.Proxies() {
		if p.Group == group {
			out = append(out, p.NodeID)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CanaryGrace is how long a canary that disconnected stays one: an Envoy that reconnects (or every Envoy,
// after lbplane restarted) finds itself on the side it was on.
const CanaryGrace = 30 * time.Second

// withAbsentCanaries adds to the connected nodes the canaries gone for less than CanaryGrace.
func (s *state) withAbsentCanaries(nodes []string, now time.Time) []string {
	if s.missing == nil {
		s.missing = map[string]time.Time{}
	}
	out := slices.Clone(nodes)
	for _, n := range s.Canaries {
		if slices.Contains(nodes, n) {
			delete(s.missing, n)
			continue
		}
		since, ok := s.missing[n]
		if !ok {
			since = now
			s.missing[n] = now
		}
		if now.Sub(since) < CanaryGrace {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// placeCanaries makes s's canaries the stage's count of nodes: the canaries still connected stay, and the
// first other nodes in node id order join. It tells whether they changed.
func (c *Controller) placeCanaries(s *state, nodes []string) bool {
	if len(nodes) == 0 {
		return false
	}
	want := s.Settings.Stages[s.Stage].Count(len(nodes))
	var next []string
	for _, n := range s.Canaries {
		if slices.Contains(nodes, n) && len(next) < want {
			next = append(next, n)
		}
	}
	for _, n := range nodes {
		if len(next) >= want {
			break
		}
		if !slices.Contains(next, n) {
			next = append(next, n)
		}
	}
	slices.Sort(next)
	if slices.Equal(next, s.Canaries) {
		return false
	}
	s.Canaries = next
	return true
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

func (c *Controller) step(now time.Time) {
	if c.Leader != nil && !c.Leader() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, group := range slices.Sorted(maps.Keys(c.byGroup)) {
		s := c.byGroup[group]
		if !s.localSince.IsZero() {
			// Decided while this replica followed, and never stored by the leader then: stored now.
			if err := c.apply(s); err != nil {
				c.log().Error("rollout", "group", group, "error", err)
				continue
			}
		}
		if s.Phase != v1alpha1.RolloutProgressing {
			continue
		}
		if err := c.progress(s, now); err != nil {
			c.log().Error("rollout", "group", group, "error", err)
		}
	}
}

// progress moves one rollout on; c.mu is held.
func (c *Controller) progress(s *state, now time.Time) error {
	if s.Kind == KindTraffic {
		return c.progressTraffic(s, now)
	}
	nStages := len(s.Settings.Stages)
	proxies := c.Proxies()
	nodes := s.withAbsentCanaries(c.nodes(s.Group), now)
	if len(nodes) == 0 {
		s.Message = fmt.Sprintf("stage %d of %d: waiting for an Envoy of group %q to connect", s.Stage+1, nStages, s.Group)
		return nil
	}
	canary := map[string]bool{}
	for _, n := range s.Canaries {
		canary[n] = true
	}
	// A canary that rejects the candidate breaches at once (checked before the canaries change: a NACK of
	// a canary that just joined counts from its stage's start).
	for _, p := range proxies {
		if p.Group != s.Group || !canary[p.NodeID] {
			continue
		}
		for _, pr := range s.Policies {
			// A NACK from before the stage began is not the candidate's.
			if msg := policystatus.RejectionSince(p, types.NamespacedName{Namespace: pr.Namespace, Name: pr.Name}, s.StageStarted); msg != "" {
				return c.rollBack(s, v1alpha1.RolloutRolledBack, fmt.Sprintf("stage %d of %d: canary %s rejected the config (%s)", s.Stage+1, nStages, p.NodeID, msg))
			}
		}
	}
	if c.placeCanaries(s, nodes) {
		s.StageStarted = now
		s.Message = fmt.Sprintf("stage %d of %d: %d of %d Envoys run the candidate", s.Stage+1, nStages, len(s.Canaries), len(nodes))
		return c.apply(s)
	}
	bake := s.Settings.BakeTime.Duration
	if now.Sub(s.StageStarted) < bake {
		s.Message = fmt.Sprintf("stage %d of %d: %d of %d Envoys run the candidate; judged at %s", s.Stage+1, nStages, len(s.Canaries),
			len(nodes), s.StageStarted.Add(bake).UTC().Format(time.RFC3339))
		return nil
	}
	can, base := c.numbers(s, nodes)
	where := fmt.Sprintf("stage %d of %d (%d of %d Envoys)", s.Stage+1, nStages, len(s.Canaries), len(nodes))
	why, passed, err := c.judge(s, can, base, where, nil)
	if !passed {
		return err
	}
	if s.Stage == nStages-1 {
		s.Phase = v1alpha1.RolloutSucceeded
		s.Message = fmt.Sprintf("every stage passed; every Envoy runs the candidate (last: %s)", why)
		s.Canaries = nil
		c.log().Info("rollout succeeded", "group", s.Group, "policies", s.keys())
		return c.apply(s)
	}
	s.Stage++
	s.StageStarted = now
	c.placeCanaries(s, nodes)
	s.Message = fmt.Sprintf("stage %d passed (%s); stage %d of %d: %d of %d Envoys run the candidate", s.Stage, why, s.Stage+1, nStages, len(s.Canaries), len(nodes))
	c.log().Info("rollout stage passed", "group", s.Group, "stage", s.Stage, "canaries", s.Canaries)
	return c.apply(s)
}

// judge records a stage's numbers on s and judges them: a hold says so in the message, a breach rolls back
// (passed false; err from the rollback); a pass keeps the reference's numbers as the next stage's earlier
// ones when they had traffic enough. name, when set, rewords the verdict's reasons. c.mu is held.
func (c *Controller) judge(s *state, can, ref v1alpha1.RolloutNumbers, where string, name func(string) string) (why string, passed bool, err error) {
	s.Canary, s.Baseline = &can, &ref
	v, why := Judge(s.Settings.Analysis, can, ref, s.Earlier)
	if name != nil {
		why = name(why)
	}
	switch v {
	case Hold:
		s.Message = where + ": holding: " + why
		return why, false, nil
	case Breach:
		return why, false, c.rollBack(s, v1alpha1.RolloutRolledBack, where+": "+why)
	}
	if ref.Requests >= *s.Settings.Analysis.MinRequests {
		s.Earlier = &ref
	}
	return why, true, nil
}

// rollBack puts every Envoy of s back on the baseline; c.mu is held.
func (c *Controller) rollBack(s *state, phase, msg string) error {
	s.Phase, s.Message = phase, msg
	c.log().Warn("rollout rolled back", "group", s.Group, "policies", s.keys(), "phase", phase, "reason", msg)
	return c.apply(s)
}

// numbers sums the canaries' and the other Envoys' windows since the stage started.
func (c *Controller) numbers(s *state, nodes []string) (canary, base v1alpha1.RolloutNumbers) {
	if c.Histories == nil {
		return
	}
	// The policies' clusters on either side: a candidate may move traffic to clusters the baseline lacks,
	// and the other way round.
	clusters := map[string]bool{}
	res, _ := c.Engine.Result()
	for _, r := range []*translate.Result{res, c.Engine.BaselineResult()} {
		if r == nil {
			continue
		}
		for _, p := range s.Policies {
			if pr := r.Policies.Of(p.key()); pr != nil {
				for _, n := range pr.Clusters {
					clusters[n] = true
				}
			}
		}
	}
	isCanary := map[string]bool{}
	for _, n := range s.Canaries {
		isCanary[n] = true
	}
	var cb, bb []proxystats.Bucket
	for _, h := range c.Histories() {
		if h.Group != s.Group || !slices.Contains(nodes, h.Node) {
			continue
		}
		w := proxystats.Since(h, s.StageStarted, clusters)
		if !w.Complete {
			continue
		}
		n, b := &base, &bb
		if isCanary[h.Node] {
			n, b = &canary, &cb
		}
		n.Envoys++
		n.Requests += int64(w.Requests)
		n.Errors += int64(w.Errors)
		*b = addAll(*b, w.Latency)
	}
	finish := func(n *v1alpha1.RolloutNumbers, bs []proxystats.Bucket) {
		if n.Requests > 0 {
			n.ErrorRate = round4(float64(n.Errors) / float64(n.Requests))
		}
		n.LatencyP99Ms = proxystats.QuantileMs(bs, 0.99)
	}
	finish(&canary, cb)
	finish(&base, bb)
	return
}

func addAll(a, b []proxystats.Bucket) []proxystats.Bucket {
	if len(a) == 0 {
		return slices.Clone(b)
	}
	m := map[float64]uint64{}
	for _, x := range a {
		m[x.UpperMs] += x.Count
	}
	for _, x := range b {
		m[x.UpperMs] += x.Count
	}
	out := make([]proxystats.Bucket, 0, len(m))
	for ub, n := range m {
		out = append(out, proxystats.Bucket{UpperMs: ub, Count: n})
	}
	slices.SortFunc(out, func(x, y proxystats.Bucket) int { return cmp.Compare(x.UpperMs, y.UpperMs) })
	return out
}

func round4(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }

// Verdicts of Judge.
const (
	Pass = iota
	Hold
	Breach
)

// Judge compares the canaries' numbers with the other Envoys' over the same window (or, when those served
// too little to judge by, with earlier's, from an earlier stage; or with an error rate of zero and no
// latency bound when there is neither). Fewer canary requests than minRequests hold.
func Judge(a *v1alpha1.RolloutAnalysis, canary, base v1alpha1.RolloutNumbers, earlier *v1alpha1.RolloutNumbers) (int, string) {
	minReq := *a.MinRequests
	if canary.Requests < minReq {
		return Hold, fmt.Sprintf("the canaries served %d requests; %d are needed to judge", canary.Requests, minReq)
	}
	ref, refName := base, "the other Envoys'"
	if base.Requests < minReq {
		switch {
		case earlier != nil:
			ref, refName = *earlier, "the other Envoys' at the last stage that had them"
		default:
			ref, refName = v1alpha1.RolloutNumbers{}, "no reference (too little traffic on the other Envoys)"
		}
	}
	if inc := canary.ErrorRate - ref.ErrorRate; inc > *a.MaxErrorRateIncrease {
		return Breach, fmt.Sprintf("canary error rate %.4f (%d errors of %d requests) exceeds %s %.4f (%d of %d) by %.4f, more than maxErrorRateIncrease %.4f",
			canary.ErrorRate, canary.Errors, canary.Requests, refName, ref.ErrorRate, ref.Errors, ref.Requests, inc, *a.MaxErrorRateIncrease)
	}
	if canary.LatencyP99Ms != nil && ref.LatencyP99Ms != nil {
		c, r := *canary.LatencyP99Ms, *ref.LatencyP99Ms
		if c > *a.MaxP99Ratio*r && c-r > v1alpha1.RolloutP99Slack {
			return Breach, fmt.Sprintf("canary p99 %.1f ms exceeds %g times %s %.1f ms", c, *a.MaxP99Ratio, refName, r)
		}
	}
	p99 := "-"
	if canary.LatencyP99Ms != nil {
		p99 = fmt.Sprintf("%.1f ms", *canary.LatencyP99Ms)
	}
	return Pass, fmt.Sprintf("canary error rate %.4f over %d requests, p99 %s; against %s %.4f over %d requests",
		canary.ErrorRate, canary.Requests, p99, refName, ref.ErrorRate, ref.Requests)
}

// Status returns the rollout status of policy k, nil when it has none.
func (c *Controller) Status(k translate.Key) *v1alpha1.RolloutStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, p := c.find(k)
	if s == nil {
		return nil
	}
	out := &v1alpha1.RolloutStatus{Phase: s.Phase, Stage: int32(s.Stage + 1), Stages: int32(len(s.Settings.Stages)),
		CandidateGeneration: p.CandidateGeneration, Canaries: slices.Clone(s.Canaries), Message: s.Message}
	if p.Baseline != nil {
		out.BaselineGeneration = p.Baseline.Generation
	}
	if ts := s.Settings.TrafficShift; s.Kind == KindTraffic && ts != nil {
		out.TrafficBackend = ts.Backend
		switch s.Phase {
		case v1alpha1.RolloutProgressing, v1alpha1.RolloutPaused:
			out.TrafficPercent = ptr(ts.Steps[s.Stage])
		case v1alpha1.RolloutRolledBack, v1alpha1.RolloutAborted:
			out.TrafficPercent = ptr(int32(0))
		}
	}
	if len(out.Canaries) > 64 {
		out.Canaries = out.Canaries[:64]
	}
	if !s.StageStarted.IsZero() {
		t := metav1.NewTime(s.StageStarted.UTC())
		out.StageStarted = &t
	}
	if s.Canary != nil {
		n := *s.Canary
		out.Canary = &n
	}
	if s.Baseline != nil {
		n := *s.Baseline
		out.Baseline = &n
	}
	return out
}

func (c *Controller) find(k translate.Key) (*state, *PolicyRef) {
	for _, s := range c.byGroup {
		for i := range s.Policies {
			if s.Policies[i].key() == k {
				return s, &s.Policies[i]
			}
		}
	}
	return nil, nil
}

// Keys are the policies in a rollout (ended ones included, as they are still reported).
func (c *Controller) Keys() []translate.Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []translate.Key
	for _, s := range c.byGroup {
		for _, p := range s.Policies {
			out = append(out, p.key())
		}
	}
	return out
}

// ErrNoRollout is returned for a policy without a rollout.
var ErrNoRollout = fmt.Errorf("the policy has no staged rollout")

// Action is pause, resume or abort (undo is a push of the baseline: see Baseline).
func (c *Controller) Action(k translate.Key, action string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retry(func() error { return c.action(k, action) })
}

// action is Action with c.mu held.
func (c *Controller) action(k translate.Key, action string) error {
	s, _ := c.find(k)
	if s == nil {
		return ErrNoRollout
	}
	switch action {
	case "pause":
		if s.Phase != v1alpha1.RolloutProgressing {
			return fmt.Errorf("the rollout is %s; only a progressing rollout can be paused", s.Phase)
		}
		s.Phase, s.Message = v1alpha1.RolloutPaused, fmt.Sprintf("paused at stage %d of %d", s.Stage+1, len(s.Settings.Stages))
	case "resume":
		switch s.Phase {
		case v1alpha1.RolloutPaused:
			s.Message = fmt.Sprintf("resumed at stage %d of %d", s.Stage+1, len(s.Settings.Stages))
		case v1alpha1.RolloutRolledBack, v1alpha1.RolloutAborted:
			// A retry: from the first stage, with the same candidate.
			s.Stage, s.Canaries, s.Earlier = 0, nil, nil
			s.Message = "retried from stage 1"
			if s.Kind != KindTraffic {
				c.placeCanaries(s, c.nodes(s.Group))
			}
		default:
			return fmt.Errorf("the rollout is %s; only a paused, rolled back or aborted rollout can be resumed", s.Phase)
		}
		s.Phase, s.StageStarted = v1alpha1.RolloutProgressing, time.Now()
	case "abort":
		if s.Phase != v1alpha1.RolloutProgressing && s.Phase != v1alpha1.RolloutPaused {
			return fmt.Errorf("the rollout is %s; only a progressing or paused rollout can be aborted", s.Phase)
		}
		return c.rollBack(s, v1alpha1.RolloutAborted, fmt.Sprintf("aborted by an operator at stage %d of %d", s.Stage+1, len(s.Settings.Stages)))
	default:
		return fmt.Errorf("unknown action %q: pause, resume, abort or undo", action)
	}
	return c.apply(s)
}

// Baseline returns the baseline record of policy k's rollout (nil when the policy was new), for undo.
func (c *Controller) Baseline(k translate.Key) (*store.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, p := c.find(k)
	if p == nil {
		return nil, ErrNoRollout
	}
	return p.Baseline, nil
}
