package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"sync"
	"time"
)

// podCache keeps this owner's pods as the API server has them, as an
// informer does: it lists them, then watches from the list's resource
// version, and lists again when the API server says that version is too
// old (its changes since then are reported as the differences). Handlers
// hear every change in order, each from a goroutine of its own, so a slow
// one holds back neither the watch nor the others.
type podCache struct {
	c        *apiClient
	path     string // the pods collection of the namespace
	selector string
	log      *slog.Logger

	mu       sync.RWMutex
	pods     map[string]*Pod
	version  string // resource version the cache reflects
	synced   chan struct{}
	handlers map[int]*podHandler
	nextID   int
}

// podHandler is a handler and the changes it has yet to hear.
type podHandler struct {
	fn      func(pod *Pod, deleted bool)
	mu      sync.Mutex
	queue   []podChange
	wake    chan struct{}
	stopped chan struct{}
}

type podChange struct {
	pod     *Pod
	deleted bool
}

func newPodCache(c *apiClient, namespace, selector string, log *slog.Logger) *podCache {
	return &podCache{c: c, path: "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods", selector: selector, log: log,
		pods: map[string]*Pod{}, synced: make(chan struct{}), handlers: map[int]*podHandler{}}
}

// run lists and watches until ctx ends.
func (pc *podCache) run(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		err := pc.listAndWatch(ctx)
		if ctx.Err() != nil {
			return
		}
		pc.log.Warn("watching the node pods failed; trying again", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// listAndWatch lists the pods (when the cache has no version to watch
// from) and watches them until the watch fails.
func (pc *podCache) listAndWatch(ctx context.Context) error {
	pc.mu.RLock()
	version := pc.version
	pc.mu.RUnlock()
	if version == "" {
		if err := pc.relist(ctx); err != nil {
			return err
		}
	}
	for ctx.Err() == nil {
		err := pc.watch(ctx)
		if isGone(err) {
			pc.mu.Lock()
			pc.version = "" // list again
			pc.mu.Unlock()
			return pc.relist(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// relist reads every pod and reports what changed since the cache's view.
func (pc *podCache) relist(ctx context.Context) error {
	fresh := map[string]*Pod{}
	cont, version := "", ""
	for {
		q := url.Values{"labelSelector": {pc.selector}, "limit": {"500"}}
		if cont != "" {
			q.Set("continue", cont)
		}
		var list PodList
		lctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := pc.c.do(lctx, "GET", pc.path+"?"+q.Encode(), "", nil, &list)
		cancel()
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		for i := range list.Items {
			p := list.Items[i]
			fresh[p.Name] = &p
		}
		if version == "" {
			version = list.ResourceVersion
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	pc.mu.Lock()
	var changes []podChange
	for name, old := range pc.pods {
		if _, ok := fresh[name]; !ok {
			changes = append(changes, podChange{pod: old, deleted: true})
		}
	}
	for name, p := range fresh {
		if old, ok := pc.pods[name]; !ok || old.ResourceVersion != p.ResourceVersion {
			changes = append(changes, podChange{pod: p})
		}
	}
	pc.pods, pc.version = fresh, version
	pc.tell(changes)
	select {
	case <-pc.synced:
	default:
		close(pc.synced)
	}
	pc.mu.Unlock()
	return nil
}

// watch follows the pods from the cache's version until the API server
// ends the watch (nil) or it fails.
func (pc *podCache) watch(ctx context.Context) error {
	pc.mu.RLock()
	version := pc.version
	pc.mu.RUnlock()
	q := url.Values{"labelSelector": {pc.selector}, "watch": {"true"}, "allowWatchBookmarks": {"true"},
		"resourceVersion": {version}, "timeoutSeconds": {fmt.Sprint(300 + rand.IntN(300))}}
	resp, err := pc.c.send(ctx, "GET", pc.path+"?"+q.Encode(), "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return nil // the server's timeout: watch again
			}
			return fmt.Errorf("watch pods: %w", err)
		}
		switch ev.Type {
		case "ERROR":
			var st struct {
				Code    int    `json:"code"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(ev.Object, &st)
			return &StatusError{Code: st.Code, Reason: st.Reason, Message: st.Message}
		case "BOOKMARK":
			var p Pod
			if json.Unmarshal(ev.Object, &p) == nil && p.ResourceVersion != "" {
				pc.mu.Lock()
				pc.version = p.ResourceVersion
				pc.mu.Unlock()
			}
		case "ADDED", "MODIFIED", "DELETED":
			p := &Pod{}
			if err := json.Unmarshal(ev.Object, p); err != nil {
				return fmt.Errorf("watch pods: %w", err)
			}
			pc.mu.Lock()
			if ev.Type == "DELETED" {
				delete(pc.pods, p.Name)
			} else {
				pc.pods[p.Name] = p
			}
			pc.version = p.ResourceVersion
			pc.tell([]podChange{{pod: p, deleted: ev.Type == "DELETED"}})
			pc.mu.Unlock()
		}
	}
}

// tell queues changes for every handler; the caller holds pc.mu.
func (pc *podCache) tell(changes []podChange) {
	if len(changes) == 0 {
		return
	}
	for _, h := range pc.handlers {
		h.mu.Lock()
		h.queue = append(h.queue, changes...)
		h.mu.Unlock()
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// waitSynced waits for the first list; false when ctx ends first.
func (pc *podCache) waitSynced(ctx context.Context) bool {
	select {
	case <-pc.synced:
		return true
	case <-ctx.Done():
		return false
	}
}

// get is the cached pod of a name.
func (pc *podCache) get(name string) (*Pod, bool) {
	pc.mu.RLock()
	defer pc.mu.RUnlock()
	p, ok := pc.pods[name]
	return p, ok
}

// list is every cached pod.
func (pc *podCache) list() []*Pod {
	pc.mu.RLock()
	defer pc.mu.RUnlock()
	out := make([]*Pod, 0, len(pc.pods))
	for _, p := range pc.pods {
		out = append(out, p)
	}
	return out
}

// addHandler has fn hear every pod in the cache now (as added) and every
// change after, in order; remove stops it.
func (pc *podCache) addHandler(fn func(pod *Pod, deleted bool)) (remove func()) {
	h := &podHandler{fn: fn, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	pc.mu.Lock()
	id := pc.nextID
	pc.nextID++
	for _, p := range pc.pods {
		h.queue = append(h.queue, podChange{pod: p})
	}
	pc.handlers[id] = h
	pc.mu.Unlock()
	h.wake <- struct{}{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-h.stopped:
				return
			case <-h.wake:
			}
			for {
				h.mu.Lock()
				q := h.queue
				h.queue = nil
				h.mu.Unlock()
				if len(q) == 0 {
					break
				}
				for _, c := range q {
					fn(c.pod, c.deleted)
				}
			}
		}
	}()
	return func() {
		pc.mu.Lock()
		delete(pc.handlers, id)
		pc.mu.Unlock()
		close(h.stopped)
		<-done
	}
}
