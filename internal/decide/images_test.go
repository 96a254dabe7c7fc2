package decide

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func imageJob(id, image string, n int, seq int64) Job {
	return Job{ID: id, InstanceCount: n, Seq: seq, Image: image}
}

func withImage(n Node, image string) Node {
	n.Image = image
	return n
}

func TestImagesNewNodesTakeTheirJobsImage(t *testing.T) {
	c := Cluster{Min: 0, Max: 4, IdleTimeout: time.Minute, Headroom: -1, ImageBound: true,
		Queued: []Job{imageJob("a", "torch:2", 1, 1), imageJob("b", "", 1, 2), imageJob("c", "torch:2", 2, 3)}}
	p := Decide(c, t0)
	got := slices.Clone(p.CreateImages)
	slices.Sort(got)
	if want := []string{"", "torch:2", "torch:2", "torch:2"}; !slices.Equal(got, want) || p.Create != 4 {
		t.Errorf("Create %d images %q; want %q", p.Create, p.CreateImages, want)
	}
}

func TestImagesJobsRunOnlyOnNodesOfTheirImage(t *testing.T) {
	c := Cluster{Min: 0, Max: 4, IdleTimeout: time.Minute, Headroom: -1, ImageBound: true,
		Nodes:  []Node{withImage(idleNode("n-torch", t0), "torch:2"), idleNode("n-plain", t0.Add(-time.Second))},
		Queued: []Job{imageJob("tf", "tf:2", 1, 1), imageJob("plain", "", 1, 2), imageJob("torch", "torch:2", 1, 3)}}
	p := Decide(c, t0)
	on := map[string]string{}
	for _, a := range p.Assign {
		on[a.JobID] = a.NodeIDs[0]
	}
	if on["plain"] != "n-plain" || on["torch"] != "n-torch" || on["tf"] != "" {
		t.Errorf("assignments %v; want plain on n-plain, torch on n-torch, tf waiting", on)
	}
	if !slices.Equal(p.CreateImages, []string{"tf:2"}) {
		t.Errorf("creates %q; want one tf:2 node", p.CreateImages)
	}
}

func TestImagesIdleNodeGivesWayAtMax(t *testing.T) {
	// At maxNodeCount 2: an idle torch node and a busy one; a tf job waits.
	// The idle torch node goes now (not at its idle timeout), and a tf node
	// takes its place.
	c := Cluster{Min: 0, Max: 2, IdleTimeout: time.Hour, Headroom: -1, ImageBound: true,
		Nodes:  []Node{withImage(idleNode("idle-torch", t0), "torch:2"), withImage(runningNode("busy", "x", t0), "torch:2")},
		Queued: []Job{imageJob("tf", "tf:2", 1, 1)}}
	p := Decide(c, t0)
	if !slices.Equal(p.Remove, []string{"idle-torch"}) || !slices.Equal(p.CreateImages, []string{"tf:2"}) {
		t.Errorf("remove %v create %q; want idle-torch removed and a tf:2 node", p.Remove, p.CreateImages)
	}
	if p.Target != 2 {
		t.Errorf("target %d; want 2", p.Target)
	}
}

func TestImagesIdleNodesKeptWhileThereIsRoom(t *testing.T) {
	c := Cluster{Min: 0, Max: 4, IdleTimeout: time.Hour, Headroom: -1, ImageBound: true,
		Nodes:  []Node{withImage(idleNode("idle-torch", t0), "torch:2")},
		Queued: []Job{imageJob("tf", "tf:2", 1, 1)}}
	p := Decide(c, t0)
	if len(p.Remove) != 0 || !slices.Equal(p.CreateImages, []string{"tf:2"}) {
		t.Errorf("remove %v create %q; want the idle node kept (room left) and a tf:2 node", p.Remove, p.CreateImages)
	}
}

func TestImagesMinNodesRunTheNodeImage(t *testing.T) {
	c := Cluster{Min: 1, Max: 3, IdleTimeout: time.Minute, Headroom: -1, ImageBound: true,
		Queued: []Job{imageJob("a", "torch:2", 1, 1)}}
	p := Decide(c, t0)
	got := slices.Clone(p.CreateImages)
	slices.Sort(got)
	if !slices.Equal(got, []string{"", "torch:2"}) {
		t.Errorf("creates %q; want a torch:2 node for the job and a node-image node for minNodeCount", p.CreateImages)
	}
}

func TestImagesBlockedAndQuota(t *testing.T) {
	c := Cluster{Min: 0, Max: 2, IdleTimeout: time.Minute, Headroom: 1, ImageBound: true,
		Queued: []Job{imageJob("a", "x", 1, 1), imageJob("b", "y", 1, 2), imageJob("c", "y", 1, 3)}}
	p := Decide(c, t0)
	if p.Create != 1 || !slices.Equal(p.CreateImages, []string{"x"}) {
		t.Errorf("creates %q; want one x node (quota allows 1, job a is first)", p.CreateImages)
	}
	if !reflect.DeepEqual(p.Blocked, api.Blocks{atMax(2), quotaAllows(1)}) {
		t.Errorf("blocked %v", p.Blocked)
	}
}

func TestImagesOneImageIsPlainDecide(t *testing.T) {
	c := Cluster{Min: 1, Max: 3, IdleTimeout: time.Minute, Headroom: -1,
		Nodes:  []Node{idleNode("n1", t0.Add(-2*time.Minute)), runningNode("n2", "j0", t0)},
		Queued: jobs("a", "b", "c")}
	want := Decide(c, t0)
	c.ImageBound = true
	got := Decide(c, t0)
	if len(got.CreateImages) != got.Create {
		t.Errorf("CreateImages %q for Create %d", got.CreateImages, got.Create)
	}
	got.CreateImages = nil
	checkPlan(t, got, want)
}

// Property: on random image-bound clusters, no job is placed on a node of
// another image, every node is used once, the cluster never goes past
// maxNodeCount, and new nodes carry images that queued jobs (or
// minNodeCount) need.
func TestImagesProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	images := []string{"", "a", "b", "c"}
	for iter := 0; iter < 3000; iter++ {
		c := Cluster{Min: r.IntN(3), Max: 1 + r.IntN(6), IdleTimeout: time.Duration(r.IntN(3)) * time.Minute, Headroom: r.IntN(8) - 1, ImageBound: true}
		for i := 0; i < r.IntN(7); i++ {
			id := string(rune('n'+0)) + string(rune('0'+i))
			var n Node
			switch r.IntN(4) {
			case 0:
				n = idleNode(id, t0.Add(-time.Duration(r.IntN(180))*time.Second))
			case 1:
				n = runningNode(id, "busy-"+id, t0)
			case 2:
				n = preparingNode(id, t0)
			default:
				n = nodeIn(id, NodeLeaving)
			}
			c.Nodes = append(c.Nodes, withImage(n, images[r.IntN(len(images))]))
		}
		for i := 0; i < r.IntN(6); i++ {
			c.Queued = append(c.Queued, imageJob("j"+string(rune('0'+i)), images[r.IntN(len(images))], 1+r.IntN(3), int64(i)))
		}
		in := cloneCluster(c)
		p := Decide(c, t0)
		imageOf := map[string]string{}
		for _, n := range c.Nodes {
			imageOf[n.ID] = n.Image
		}
		jobImage := map[string]string{}
		need := map[string]bool{}
		for _, j := range c.Queued {
			jobImage[j.ID] = j.Image
			need[j.Image] = true
		}
		used := map[string]bool{}
		for _, a := range p.Assign {
			for _, id := range a.NodeIDs {
				if imageOf[id] != jobImage[a.JobID] {
					t.Fatalf("iter %d: job %s (%q) on node %s (%q)\n%+v", iter, a.JobID, jobImage[a.JobID], id, imageOf[id], c)
				}
				if used[id] {
					t.Fatalf("iter %d: node %s used twice", iter, id)
				}
				used[id] = true
			}
		}
		if len(p.CreateImages) != p.Create {
			t.Fatalf("iter %d: %d images for %d creations", iter, len(p.CreateImages), p.Create)
		}
		for _, img := range p.CreateImages {
			if !need[img] && !(img == "" && c.Min > 0) {
				t.Fatalf("iter %d: creates a %q node no job needs\n%+v\n%s", iter, img, c, show(p))
			}
		}
		live := 0
		for _, n := range c.Nodes {
			if classOf(&n, nil) != classExiting {
				live++
			}
		}
		removedLive := 0
		for _, id := range p.Remove {
			for _, n := range c.Nodes {
				if n.ID == id && classOf(&n, nil) != classExiting {
					removedLive++
				}
			}
		}
		if after := live - removedLive + p.Create; after > max(c.Max, live-removedLive) {
			t.Fatalf("iter %d: %d live nodes after the plan, max %d\n%+v\n%s", iter, after, c.Max, c, show(p))
		}
		if c.Headroom >= 0 && p.Create > c.Headroom {
			t.Fatalf("iter %d: creates %d past headroom %d", iter, p.Create, c.Headroom)
		}
		if !slices.Equal(in.Nodes, c.Nodes) || !slices.Equal(in.Queued, c.Queued) {
			t.Fatalf("iter %d: Decide modified its input", iter)
		}
	}
}

func TestImagesPreparingNodeServesItsImage(t *testing.T) {
	// A torch node idles after its job; the plain job's node is still
	// preparing. Nothing is removed or created: the preparing node will
	// take the plain job.
	c := Cluster{Min: 0, Max: 2, IdleTimeout: time.Minute, Headroom: -1, ImageBound: true,
		Nodes:  []Node{withImage(idleNode("torch", t0), "torch:2"), preparingNode("plain-node", t0)},
		Queued: []Job{imageJob("plain", "", 1, 1)}}
	p := Decide(c, t0)
	if len(p.Remove) != 0 || p.Create != 0 {
		t.Errorf("remove %v create %d; want nothing (the preparing node serves the job)", p.Remove, p.Create)
	}
}
