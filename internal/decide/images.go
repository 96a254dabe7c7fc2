package decide

import (
	"slices"
	"strings"
	"time"
)

// Image-bound clusters (Cluster.ImageBound): every node runs one image,
// fixed at creation, and a job runs only on nodes of its image. The cluster
// is split by image into groups, each decided by the ordinary rules with
// its own share of maxNodeCount:
//
//   - Every group keeps its busy and preparing nodes.
//   - The queue, in order, claims nodes for each job: preparing nodes of
//     its image first, then room under maxNodeCount for idle nodes of its
//     image, then for new nodes. The
//     first job that does not fit takes what room is left and the claims
//     stop there (head of line, as in Schedule).
//   - minNodeCount applies to the node image (""): those nodes are the
//     generic ones jobs without an image run on.
//   - Room still left keeps idle nodes that no job claimed, until their
//     idle time ends. Idle nodes beyond a group's share are removed now: at
//     maxNodeCount, an idle node of one image gives way to a waiting job of
//     another.
//
// With one image (or none) this is exactly Decide.

// DecideImages is Decide for an image-bound cluster.
func decideImages(c Cluster, now time.Time) Plan {
	byImage := map[string]*imageGroup{}
	var groups []*imageGroup
	get := func(image string) *imageGroup {
		g := byImage[image]
		if g == nil {
			g = &imageGroup{image: image, first: -1}
			byImage[image] = g
			groups = append(groups, g)
		}
		return g
	}
	requeued := requeuedJobs(c)
	for _, n := range c.Nodes {
		g := get(n.Image)
		g.nodes = append(g.nodes, n)
		switch classOf(&n, requeued) {
		case classBusy:
			g.committed++
		case classPreparing:
			g.committed++
			g.preparing++
		case classIdle:
			g.idle++
		}
	}
	order := orderOf(c, now)
	for pos, k := range order {
		g := get(c.Queued[k].Image)
		g.queued = append(g.queued, c.Queued[k])
		if g.first < 0 {
			g.first = pos
		}
	}
	lo, hi := limits(c)
	if lo > 0 {
		get("") // minNodeCount nodes run the node image
	}
	plain := c
	plain.ImageBound = false
	if len(groups) <= 1 {
		p := decideNodes(plain, now, nil)
		if p.Create > 0 {
			image := ""
			if len(groups) == 1 {
				image = groups[0].image
			}
			p.CreateImages = slices.Repeat([]string{image}, p.Create)
		}
		return p
	}
	shareRoom(c, order, byImage, groups)

	// Groups with queued jobs decide first, in queue order, so quota
	// headroom goes to the jobs ahead.
	slices.SortStableFunc(groups, func(a, b *imageGroup) int {
		switch {
		case a.first >= 0 && b.first >= 0:
			return a.first - b.first
		case a.first >= 0:
			return -1
		case b.first >= 0:
			return 1
		}
		return strings.Compare(a.image, b.image)
	})
	var p Plan
	headroom := c.Headroom
	busy := 0
	for _, g := range groups {
		sub := plain
		sub.Nodes, sub.Queued, sub.Max, sub.Min, sub.Headroom = g.nodes, g.queued, g.cap, 0, headroom
		if g.image == "" {
			sub.Min = min(lo, g.cap)
		}
		gp := decideNodes(sub, now, nil)
		if headroom >= 0 {
			headroom -= gp.Create
		}
		p.Assign = append(p.Assign, gp.Assign...)
		p.Remove = append(p.Remove, gp.Remove...)
		p.Drain = append(p.Drain, gp.Drain...)
		p.Create += gp.Create
		p.CreateImages = append(p.CreateImages, slices.Repeat([]string{g.image}, gp.Create)...)
		p.Target += gp.Target
		p.QuotaShort += gp.QuotaShort
		p.QuotaWait = append(p.QuotaWait, gp.QuotaWait...)
		if !gp.WakeAt.IsZero() && (p.WakeAt.IsZero() || gp.WakeAt.Before(p.WakeAt)) {
			p.WakeAt = gp.WakeAt
		}
		for i := range g.nodes {
			if classOf(&g.nodes[i], requeued) == classBusy {
				busy++
			}
		}
	}
	// Why demand is not met, in the cluster's terms rather than a group's.
	demand, unfit := demandOf(c.Queued, hi)
	p.Blocked = blocked(c, unfit, busy, demand, p.QuotaShort > 0, max(c.Headroom, 0))
	return p
}

// imageGroup is the part of a cluster that runs one image.
type imageGroup struct {
	image     string
	nodes     []Node
	queued    []Job
	committed int // busy and preparing nodes
	preparing int
	idle      int
	first     int // queue position of its first job; -1 if none queued
	cap       int // its share of maxNodeCount
}

// shareRoom sets each group's cap (see the rules above).
func shareRoom(c Cluster, order []int, byImage map[string]*imageGroup, groups []*imageGroup) {
	lo, hi := limits(c)
	room := hi
	for _, g := range groups {
		g.cap = g.committed
		room -= g.committed
	}
	if room < 0 {
		// maxNodeCount was lowered below the nodes in use: the largest
		// groups give up nodes first (their busy ones are drained).
		for ; room < 0; room++ {
			largest := groups[0]
			for _, g := range groups[1:] {
				if g.cap > largest.cap {
					largest = g
				}
			}
			largest.cap--
		}
		return
	}
	idleLeft, preparingLeft := map[*imageGroup]int{}, map[*imageGroup]int{}
	for _, g := range groups {
		idleLeft[g], preparingLeft[g] = g.idle, g.preparing
	}
	for _, k := range order {
		j := &c.Queued[k]
		n := need(j)
		if n > hi {
			continue // can never run; claims nothing
		}
		g := byImage[j.Image]
		coming := min(preparingLeft[g], n) // already counted in the cap
		preparingLeft[g] -= coming
		n -= coming
		use := min(idleLeft[g], n, room)
		idleLeft[g] -= use
		g.cap += use
		room -= use
		rest := n - use
		if rest > room {
			g.cap += room
			room = 0
			break
		}
		g.cap += rest
		room -= rest
	}
	if g := byImage[""]; g != nil {
		extra := min(max(lo-g.cap, 0), room)
		g.cap += extra
		room -= extra
		idleLeft[g] = max(idleLeft[g]-extra, 0)
	}
	for _, g := range groups {
		keep := min(idleLeft[g], room)
		g.cap += keep
		room -= keep
	}
}
