package pushapi

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mathrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/lint"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/resdiff"
	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/translate"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Admission decides whether pushes and deletes are taken, all or nothing, and writes the store and the
// engine together when they are. It is apart from the HTTP handlers so that a push is the same decision
// whichever way it arrives, and so that it can be tested without HTTP.
type Admission struct {
	Store  store.Store
	Engine *engine.Engine
	Log    *slog.Logger
	// Versions, when set, returns the config version each proxy group is asked to serve: a push tells
	// which groups it changed by comparing them before and after.
	Versions func() map[string]string
	// Rollouts, when set, stages the changes a push asks to stage (see rollout.go).
	Rollouts *rollout.Controller
	// RolloutDefault is the mode of a push that names none (rollout.ModeStaged or ModeImmediate/empty).
	RolloutDefault string
	// Metrics, when set, counts the policies pushes change (lbplane_source_changes_total{source="store"}).
	Metrics *metrics.Metrics

	mu sync.Mutex // one write at a time: store and engine change together
	// recs and sorted are the store's records and their policies in key order (store.CompareKeys), read once (see
	// loaded) and kept up to date by every write, so that a push decodes only what it pushes. Guarded by mu.
	recs   map[objkey.Key]*store.Record
	sorted []*v1alpha1.LoadBalancerPolicy
	// rev is the store revision recs were read at, the base of the next write. Guarded by mu.
	rev int64
	// queue is the pushes waiting to be written (see pending). Guarded by qmu, which is never held while
	// waiting for mu.
	qmu   sync.Mutex
	queue []*pending
}

// conflictRetryFor bounds how long a write planned on a store that other replicas keep changing is planned
// again on the new records before the push is refused (409).
const conflictRetryFor = 10 * time.Second

// retryConflict tells whether a write that met store.ErrConflict, first tried at start, is planned again,
// after a short wait: a growing, random back-off (1 ms up to 50 ms), so that replicas whose writes
// collided do not collide again in step, and a replica slower to plan than the others (one that just
// started) does not lose every round of a storm of pushes. A count of tries alone ran out in such a storm.
func retryConflict(err error, try int, start time.Time) bool {
	if !errors.Is(err, store.ErrConflict) || time.Since(start) >= conflictRetryFor {
		return false
	}
	most := min(time.Millisecond<<min(try, 6), 50*time.Millisecond)
	time.Sleep(time.Millisecond + mathrand.N(most))
	return true
}

// admission returns the server's admission, made from its Store, Engine and Log on first use.
func (s *Server) admission() *Admission {
	s.admitOnce.Do(func() {
		s.admit = &Admission{Store: s.Store, Engine: s.Engine, Log: s.Log, Rollouts: s.Rollouts, RolloutDefault: s.RolloutDefault, Metrics: s.Metrics}
		if s.Tracker != nil {
			s.admit.Versions = s.Tracker.Targets
		}
	})
	return s.admit
}

// Apply validates and stores the documents in body, all or nothing (see Admission.Apply).
func (s *Server) Apply(body []byte, dryRun bool) (*ApplyResult, int, []string) {
	return s.admission().Apply(body, dryRun)
}

// Load reads the store into the engine, and the conditions' transition times; serve calls it before xDS is
// served.
func (s *Server) Load() error {
	if err := s.admission().Load(); err != nil {
		return err
	}
	s.loadConditionTimes()
	return nil
}

// Sync brings the engine to what the store holds after another replica changed it (Admission.Sync).
func (s *Server) Sync() error { return s.admission().Sync() }

// Diff answers what pushing body would change in Envoy's resources, changing nothing. It returns the HTTP
// status and every error when the push would be refused.
func (a *Admission) Diff(body []byte) (*apiwire.DiffResult, int, []string) {
	req, code, errs := a.decode(body)
	if errs != nil {
		return nil, code, errs
	}
	a.mu.Lock()
	pl, code, errs := a.plan(req, true)
	a.mu.Unlock()
	if errs != nil {
		return nil, code, errs
	}
	changes, err := resdiff.Results(pl.before, pl.after)
	if err != nil {
		return nil, http.StatusInternalServerError, []string{err.Error()}
	}
	if changes == nil {
		changes = []resdiff.Change{}
	}
	return &apiwire.DiffResult{Policies: pl.res.Policies, Changes: changes}, http.StatusOK, nil
}

// Delete removes one stored policy; it returns the HTTP status with the error when it refuses.
func (a *Admission) Delete(k objkey.Key) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, origin := a.Engine.Result(); origin[k] == engine.SourceConfigDir {
		return http.StatusConflict, fmt.Errorf("%s: managed by --config-dir; remove its file instead", k)
	}
	start := time.Now()
	for try := 0; ; try++ {
		if err := a.loaded(); err != nil {
			return storeErrCode(err), err
		}
		if _, ok := a.recs[k]; !ok {
			return http.StatusNotFound, fmt.Errorf("policy %s not found", k)
		}
		changes := map[objkey.Key]*store.Record{k: nil}
		candidate, err := a.candidate(changes)
		if err != nil {
			return http.StatusInternalServerError, err
		}
		rev, err := a.Store.Apply(a.rev, nil, []objkey.Key{k})
		if retryConflict(err, try, start) {
			// Read again, and decide again on what the store holds now.
			if err := a.syncEngine(); err != nil {
				return storeErrCode(err), err
			}
			continue
		}
		if err != nil {
			return storeErrCode(err), fmt.Errorf("writing the store: %w", err)
		}
		a.rev = rev
		if a.Rollouts != nil {
			if err := a.Rollouts.Unstage([]objkey.Key{k}); err != nil {
				a.Log.Error("ending the rollout of a deleted policy", "policy", k.String(), "error", err)
			}
		}
		a.committed(changes, candidate)
		a.Engine.Set(engine.SourceStore, candidate)
		a.Metrics.SourceChange(metrics.SourceStore, v1alpha1.Kind, 1)
		return http.StatusOK, nil
	}
}

// storeErrCode is the HTTP status of a store error: 503 when the store cannot be reached (this replica
// serves its last good state and takes no writes), 409 when other writers kept changing it, 413 when the
// write is more than the store takes at once, else 500.
func storeErrCode(err error) int {
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, store.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, store.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

// plan is what a push would do: the outcome per policy, the records to write, and the translation before
// and after.
type plan struct {
	res           *ApplyResult
	puts          []*store.Record
	changes       map[objkey.Key]*store.Record
	candidate     []*v1alpha1.LoadBalancerPolicy
	planned       *engine.Planned
	before, after *translate.Result
}

// Apply validates and stores the documents in body, all or nothing. It returns the HTTP status and every
// error when it refuses.
func (a *Admission) Apply(body []byte, dryRun bool) (*ApplyResult, int, []string) {
	res, _, code, errs := a.apply(body, dryRun, "")
	return res, code, errs
}

// apply is Apply, also returning the proxy groups whose config the push changed (with Versions set).
func (a *Admission) apply(body []byte, dryRun bool, mode string) (*ApplyResult, []string, int, []string) {
	req, code, errs := a.decode(body)
	if errs != nil {
		return nil, nil, code, errs
	}
	if dryRun {
		a.mu.Lock()
		defer a.mu.Unlock()
		pl, code, errs := a.plan(req, true)
		if errs != nil {
			return nil, nil, code, errs
		}
		return pl.res, nil, http.StatusOK, nil
	}
	return a.queued(req, mode).answer()
}

// A push is written in a group commit: pushes that arrive while another one is being written wait in
// a.queue, and the next one to take a.mu writes every push queued by then. Pushes of the same rollout mode
// and of different policies are planned together, written in one store transaction and translated once,
// so that several writers pay for one write to etcd and one fan-out to the Envoys, not one each, in
// turn. When such pushes are refused together (one conflicts with the others or with the store, or the
// write is too large), each is planned and written alone, in the order they came: a push is never
// refused for another's fault.
type pending struct {
	req  *request
	mode string
	done bool
	// The push's answer, once done.
	res    *ApplyResult
	groups []string
	code   int
	errs   []string
}

func (p *pending) answer() (*ApplyResult, []string, int, []string) {
	return p.res, p.groups, p.code, p.errs
}

// queued writes the push req, with the pushes queued beside it, and returns it answered.
func (a *Admission) queued(req *request, mode string) *pending {
	p := &pending{req: req, mode: mode}
	a.qmu.Lock()
	a.queue = append(a.queue, p)
	a.qmu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.done {
		// Written by the push that held a.mu when this one came.
		return p
	}
	a.qmu.Lock()
	batch := a.queue
	a.queue = nil
	a.qmu.Unlock()
	for len(batch) > 0 {
		n := together(batch)
		a.writeGroup(batch[:n])
		batch = batch[n:]
	}
	return p
}

// together counts the pushes at the head of batch that can be planned as one: the same rollout mode, and
// no policy in two of them (each push's own outcome would be lost).
func together(batch []*pending) int {
	seen := map[objkey.Key]bool{}
	for i, p := range batch {
		if p.mode != batch[0].mode {
			return i
		}
		for _, k := range p.req.order {
			if seen[k] {
				return i
			}
		}
		for _, k := range p.req.order {
			seen[k] = true
		}
	}
	return len(batch)
}

// writeGroup writes pushes planned as one, or each alone when they are refused together. The caller
// holds a.mu.
func (a *Admission) writeGroup(group []*pending) {
	if len(group) > 1 {
		req := &request{pushed: map[objkey.Key]manifest.Document{}}
		for _, p := range group {
			maps.Copy(req.pushed, p.req.pushed)
			req.order = append(req.order, p.req.order...)
		}
		pl, groups, stored, code, errs := a.write(req, group[0].mode)
		if errs == nil || stored || code >= http.StatusInternalServerError {
			// Written, or refused for what is not any push's fault (an unreachable store): the answer of each.
			if stored {
				a.Metrics.PushGroup(len(group))
			}
			from := 0
			for _, p := range group {
				p.done, p.code, p.errs = true, code, errs
				if errs == nil {
					n := len(p.req.order)
					p.res = &ApplyResult{Policies: pl.res.Policies[from : from+n]}
					p.groups = groupsOf(pl, p.req.order, groups)
					from += n
				}
			}
			return
		}
	}
	for _, p := range group {
		pl, groups, stored, code, errs := a.write(p.req, p.mode)
		if stored {
			a.Metrics.PushGroup(1)
		}
		p.done, p.groups, p.code, p.errs = true, groups, code, errs
		if errs == nil {
			p.res = pl.res
		}
	}
}

// groupsOf is the proxy groups, among changed, that serve the policies keys before or after the write pl.
func groupsOf(pl *plan, keys []objkey.Key, changed []string) []string {
	serve := map[string]bool{}
	for _, k := range keys {
		for _, res := range []*translate.Result{pl.before, pl.after} {
			if pr := res.Policies.Of(k); pr != nil {
				serve[pr.ProxyGroup] = true
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(changed), func(g string) bool { return !serve[g] })
}

// write plans the push req, writes it to the store and publishes it, retrying while other replicas'
// writes conflict; it returns the plan and the proxy groups whose config changed (with Versions set), or
// the HTTP status and errors of its refusal, and whether the store holds the push (an error can come
// after it was written). The caller holds a.mu.
func (a *Admission) write(req *request, mode string) (pl *plan, groups []string, stored bool, code int, errs []string) {
	var staged []rollout.Change
	var unstaged []objkey.Key
	start := time.Now()
	for try := 0; ; try++ {
		pl, code, errs = a.plan(req, false)
		if errs != nil {
			return nil, nil, false, code, errs
		}
		staged, unstaged = a.stage(pl, mode)
		if a.Rollouts != nil && len(staged) > 0 {
			if err := a.Rollouts.Check(staged); err != nil {
				return nil, nil, false, http.StatusConflict, []string{err.Error()}
			}
		}
		// The rollouts start before the policies are stored: a replica sharing the store that reads the new
		// generation already serves it to the canaries alone.
		undo, err := a.beginRollouts(staged)
		if err != nil {
			return nil, nil, false, storeErrCode(err), []string{"starting the rollout: " + err.Error()}
		}
		rev, err := a.Store.Apply(a.rev, pl.puts, nil)
		if err != nil {
			undo()
		}
		if retryConflict(err, try, start) {
			// Another replica wrote the store since this replica last read it: plan again on what it holds
			// now, with the same validation and conflict rules.
			if err := a.syncEngine(); err != nil {
				return nil, nil, false, storeErrCode(err), []string{"reading the store: " + err.Error()}
			}
			continue
		}
		if err != nil {
			return nil, nil, false, storeErrCode(err), []string{"writing the store: " + err.Error()}
		}
		a.rev = rev
		break
	}
	res := pl.res
	if err := a.unstageRollouts(unstaged); err != nil {
		return nil, nil, true, storeErrCode(err), []string{"ending the rollout: " + err.Error()}
	}
	a.committed(pl.changes, pl.candidate)
	var before map[string]string
	if a.Versions != nil {
		before = a.Versions()
	}
	a.Engine.Commit(pl.planned)
	if a.Versions != nil {
		for g, v := range a.Versions() {
			if before[g] != v {
				groups = append(groups, g)
			}
		}
		slices.Sort(groups)
	}
	for _, p := range res.Policies {
		if p.Outcome != Unchanged {
			a.Log.Info("policy "+p.Outcome, "policy", objkey.Key{Namespace: p.Namespace, Name: p.Name}.String(), "generation", p.Generation)
			a.Metrics.SourceChange(metrics.SourceStore, v1alpha1.Kind, 1)
		}
	}
	return pl, groups, true, http.StatusOK, nil
}

// request is a push's documents, decoded and checked each on its own.
type request struct {
	pushed map[objkey.Key]manifest.Document
	order  []objkey.Key
}

// decode decodes a push's documents and checks that each policy is in it once: work that needs neither the
// store nor the engine's state, done before a.mu is taken so that a large request holds no other push up.
// The policies are validated once, by the translation of plan. A request of
// more than manifest.MaxDocuments documents is refused whole (413) as soon as the decoder reaches the limit.
func (a *Admission) decode(body []byte) (*request, int, []string) {
	docs, err := manifest.DecodeBytes("request", body)
	if errors.Is(err, manifest.ErrTooManyDocuments) {
		return nil, http.StatusRequestEntityTooLarge, []string{err.Error()}
	}
	var errs []string
	if err != nil {
		errs = append(errs, splitJoined(err)...)
	}
	if len(docs) == 0 && err == nil {
		return nil, http.StatusBadRequest, []string{"the request holds no policy"}
	}
	pushed := map[objkey.Key]manifest.Document{}
	var order []objkey.Key
	for _, d := range docs {
		k := objkey.Of(d.Policy)
		if _, dup := pushed[k]; dup {
			errs = append(errs, fmt.Sprintf("%s: %s is in the request twice", d.Source, k))
			continue
		}
		pushed[k] = d
		order = append(order, k)
	}
	if len(errs) > 0 {
		return nil, http.StatusUnprocessableEntity, errs
	}
	return &request{pushed: pushed, order: order}, http.StatusOK, nil
}

// fieldErrors lists the field errors of the policies keys in res, each with the document it came from.
func fieldErrors(res *translate.Result, keys []objkey.Key, source func(objkey.Key) string) []string {
	var errs []string
	for _, k := range keys {
		if pr := res.Policies.Of(k); pr != nil && pr.AcceptedReason == translate.ReasonInvalid {
			for _, e := range pr.Errors {
				errs = append(errs, fmt.Sprintf("%s (%s): %s", k, source(k), e.Error()))
			}
		}
	}
	return errs
}

// plan works out what a decoded push would change; the caller holds a.mu.
func (a *Admission) plan(req *request, dryRun bool) (*plan, int, []string) {
	pushed, order := req.pushed, req.order
	var errs []string
	if err := a.loaded(); err != nil {
		return nil, storeErrCode(err), []string{"reading the store: " + err.Error()}
	}
	changes := map[objkey.Key]*store.Record{}
	_, origin := a.Engine.Result()
	now := a.now()
	res := &ApplyResult{DryRun: dryRun}
	var puts []*store.Record
	for _, k := range order {
		if origin[k] == engine.SourceConfigDir {
			errs = append(errs, fmt.Sprintf("%s: managed by --config-dir; change its file instead", k))
			continue
		}
		d := pushed[k]
		old := a.recs[k]
		rec := &store.Record{Namespace: k.Namespace, Name: k.Name, Document: d.Raw, Generation: 1, Created: now, Updated: now, UID: newUID()}
		outcome := Created
		if old != nil {
			rec.Created, rec.UID, rec.Generation = old.Created, old.UID, old.Generation
			outcome = Unchanged
			if !bytes.Equal(old.Document, d.Raw) {
				outcome = Configured
				if !sameSpec(old, d.Policy) {
					rec.Generation++
				}
			} else {
				rec.Updated = old.Updated
			}
		}
		if outcome != Unchanged {
			// The push's policy, decoded once: the engine, rollouts and undo read it from the record.
			rec.WithPolicy(d.Policy)
			puts = append(puts, rec)
			changes[k] = rec
		}
		res.Policies = append(res.Policies, AppliedPolicy{Namespace: k.Namespace, Name: k.Name, Outcome: outcome, Generation: rec.Generation})
	}
	if len(errs) > 0 {
		return nil, http.StatusConflict, errs
	}
	candidate, err := a.candidate(changes)
	if err != nil {
		return nil, http.StatusInternalServerError, []string{err.Error()}
	}
	// Conflicts: a pushed policy that would not be accepted, or an accepted one that this push would push out.
	before, _ := a.Engine.Result()
	planned := a.Engine.Plan(engine.SourceStore, candidate)
	after := planned.Result
	// Each pushed policy is defaulted and validated once, by the translation that plans it (translate.Prepare):
	// its field errors refuse the push.
	if errs := fieldErrors(after, order, func(k objkey.Key) string { return pushed[k].Source }); len(errs) > 0 {
		return nil, http.StatusUnprocessableEntity, errs
	}
	for _, k := range order {
		pr := after.Policies.Of(k)
		switch {
		case pr == nil:
		case !pr.Accepted:
			errs = append(errs, fmt.Sprintf("%s: %s", k, pr.AcceptedMessage))
		case !pr.ResolvedRefs && pr.ResolvedRefsReason == translate.ReasonInvalidRef:
			// A certificate or CA that cannot be used would take the policy out of service; refuse the push
			// and keep the last good version serving.
			errs = append(errs, fmt.Sprintf("%s: %s", k, strings.TrimSuffix(pr.ResolvedRefsMessage, " (the policy is not served until this is fixed)")))
		case !pr.ResolvedRefs && pr.ResolvedRefsReason == translate.ReasonForbiddenAddress:
			// A host name that resolves where no backend may go is refused at admission; one that turns there
			// later (rebinding) has those addresses left out, with this message in status.
			errs = append(errs, fmt.Sprintf("%s: %s", k, pr.ResolvedRefsMessage))
		}
	}
	pushedOut := func(k objkey.Key, pr *translate.PolicyResult) {
		if _, ok := pushed[k]; ok || pr == nil || !pr.Accepted {
			return
		}
		if now := after.Policies.Of(k); now != nil && !now.Accepted {
			errs = append(errs, fmt.Sprintf("%s would no longer be accepted: %s", k, now.AcceptedMessage))
		}
	}
	if keys, ok := after.ChangedSince(before); ok {
		// Only the policies the translator touched can have lost their acceptance.
		for _, k := range keys {
			pushedOut(k, before.Policies.Of(k))
		}
	} else {
		for k, pr := range before.Policies.All() {
			pushedOut(k, pr)
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return nil, http.StatusConflict, errs
	}
	for i := range res.Policies {
		k := objkey.Key{Namespace: res.Policies[i].Namespace, Name: res.Policies[i].Name}
		if pr := after.Policies.Of(k); pr != nil {
			// The push does not know the group's clients; status shows the gRPC findings where there are.
			res.Policies[i].Warnings, _ = lint.ForClients(pr.Warnings, false)
		}
	}
	return &plan{res: res, puts: puts, changes: changes, candidate: candidate, planned: planned, before: before, after: after}, http.StatusOK, nil
}

func (a *Admission) now() time.Time {
	return time.Now().UTC()
}

func newUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// sameSpec tells whether the stored record old holds the spec p has, as the API server would tell it: by
// the typed specs (a duration spelled 10s or 10000ms is the same), decoded once each (the record keeps its
// policy, and p is the push's). A record that no longer decodes has another spec.
func sameSpec(old *store.Record, p *v1alpha1.LoadBalancerPolicy) bool {
	o, err := old.Policy()
	return err == nil && equality.Semantic.DeepEqual(o.Spec, p.Spec)
}

func splitJoined(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

// loaded reads the store into a.recs and a.sorted once. Afterwards every write through this admission
// goes through a.mu and committed, so what it keeps is what the store holds, and a push reads and decodes
// only the records it changes instead of every one: listing and decoding every record was most of a push's
// CPU with 10,000 policies stored. With a shared store (etcd) another replica may write too; then the
// write fails with store.ErrConflict, a.recs is dropped, and sync reads the store again, decoding only the
// records that changed. The caller holds a.mu.
func (a *Admission) loaded() error {
	if a.recs != nil {
		return nil
	}
	_, err := a.sync()
	return err
}

// sync reads the store and brings a.recs and a.sorted to what it holds, decoding only the records that
// differ from the ones kept; it reports whether anything changed. The caller holds a.mu.
func (a *Admission) sync() (bool, error) {
	records, rev, err := a.Store.List()
	if err != nil {
		return false, err
	}
	had := make(map[objkey.Key]*v1alpha1.LoadBalancerPolicy, len(a.sorted))
	if a.recs != nil {
		for _, p := range a.sorted {
			had[objkey.Of(p)] = p
		}
	}
	changed := a.recs == nil || len(records) != len(a.recs)
	recs := make(map[objkey.Key]*store.Record, len(records))
	sorted := make([]*v1alpha1.LoadBalancerPolicy, 0, len(records))
	for _, rec := range records { // sorted by namespace/name, as store.CompareKeys orders
		k := rec.Key()
		p := had[k]
		if old := a.recs[k]; p == nil || old == nil || !old.Equal(rec) {
			if p, err = rec.Policy(); err != nil {
				return false, err
			}
			changed = true
		}
		recs[k] = rec
		sorted = append(sorted, p)
	}
	a.recs, a.sorted, a.rev = recs, sorted, rev
	return changed, nil
}

// changeFeed is a store shared with other writers that tells what they changed since a revision
// (store.Etcd, from its watch's events).
type changeFeed interface {
	ChangesSince(base int64) (puts []*store.Record, deletes []objkey.Key, rev int64, ok bool)
}

// Sync brings the engine to what the store holds when another writer (a replica sharing the etcd store)
// changed it; serve calls it on each change the store reports. With a store that tells what changed
// (changeFeed), only those records are decoded and handed to the engine, as a push on this replica
// would: reading and comparing every record was most of a change's cost with 10,000 policies stored,
// and it was paid for this replica's own pushes too, which the watch reports like any other.
func (a *Admission) Sync() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if feed, ok := a.Store.(changeFeed); ok && a.recs != nil {
		if puts, deletes, rev, ok := feed.ChangesSince(a.rev); ok {
			return a.follow(puts, deletes, rev)
		}
	}
	return a.syncEngine()
}

// follow applies what another writer changed (records put, keys deleted) up to revision rev to a.recs
// and the engine; records this replica holds already (its own writes) change nothing. The caller holds
// a.mu.
func (a *Admission) follow(puts []*store.Record, deletes []objkey.Key, rev int64) error {
	changes := map[objkey.Key]*store.Record{}
	for _, rec := range puts {
		k := rec.Key()
		if old := a.recs[k]; old == nil || !old.Equal(rec) {
			changes[k] = rec
		}
	}
	for _, k := range deletes {
		if _, ok := a.recs[k]; ok {
			changes[k] = nil
		}
	}
	if len(changes) > 0 {
		candidate, err := a.candidate(changes)
		if err != nil {
			return err
		}
		a.committed(changes, candidate)
		a.Engine.Set(engine.SourceStore, candidate)
	}
	a.rev = rev
	return nil
}

// syncEngine is Sync with a.mu held: the engine then judges a push against what every replica wrote.
func (a *Admission) syncEngine() error {
	changed, err := a.sync()
	if err != nil {
		return err
	}
	if changed {
		a.Engine.Set(engine.SourceStore, a.sorted)
	}
	return nil
}

// candidate is the stored policies with changes applied (a nil record deletes), in key order. Unchanged
// policies are the ones decoded before (shared, so nothing may modify them; translation copies what it
// changes), which also tells the engine they did not change. The caller holds a.mu.
func (a *Admission) candidate(changes map[objkey.Key]*store.Record) ([]*v1alpha1.LoadBalancerPolicy, error) {
	out := slices.Clone(a.sorted)
	for _, k := range slices.SortedFunc(maps.Keys(changes), store.CompareKeys) {
		i, found := searchKey(out, k)
		rec := changes[k]
		if rec == nil {
			if found {
				out = slices.Delete(out, i, i+1)
			}
			continue
		}
		p, err := rec.Policy()
		if err != nil {
			return nil, err
		}
		if found {
			out[i] = p
		} else {
			out = slices.Insert(out, i, p)
		}
	}
	return out, nil
}

// committed records that the store now holds changes, and candidate is its policies. The caller holds a.mu.
func (a *Admission) committed(changes map[objkey.Key]*store.Record, candidate []*v1alpha1.LoadBalancerPolicy) {
	for k, rec := range changes {
		if rec == nil {
			delete(a.recs, k)
		} else {
			a.recs[k] = rec
		}
	}
	a.sorted = candidate
}

// searchKey finds k in policies sorted by key (store.CompareKeys): its index and whether it is there, or where it
// would go.
func searchKey(sorted []*v1alpha1.LoadBalancerPolicy, k objkey.Key) (int, bool) {
	return slices.BinarySearchFunc(sorted, k, func(p *v1alpha1.LoadBalancerPolicy, k objkey.Key) int { return store.CompareKeys(objkey.Of(p), k) })
}

// Load reads the store into the engine.
func (a *Admission) Load() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs, a.sorted = nil, nil
	if err := a.loaded(); err != nil {
		return err
	}
	a.Engine.Set(engine.SourceStore, a.sorted)
	return nil
}
