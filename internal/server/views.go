package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/fairshare"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// computeView is what GET returns: the stored compute, without secrets,
// with where each group stands on a fair-share compute,
// with the read-only fields computed from the nodes that exist now.
func (s *Server) computeView(ctx context.Context, c api.Compute) (api.Compute, error) {
	counts, err := store.NodeCounts(ctx, s.db.Q(), c.ID)
	if err != nil {
		return c, err
	}
	v := computeWithCounts(c, counts)
	v.Aml().NetworkIsolation = s.cfg.Network.Describe(v)
	if c.Queue().FairShare {
		now := s.clock.Now().UTC()
		nodes, err := store.NodesOf(ctx, s.db.Q(), c.ID)
		if err != nil {
			return v, err
		}
		st, err := fairshare.Read(ctx, s.db.Q(), c, nodes, c.LargestMax()+1, now)
		if err != nil {
			return v, err
		}
		if v.Aml().FairShare, err = s.fairShare(ctx, s.db.Q(), c, st.Cluster(c, nodes, false, now), now); err != nil {
			return v, err
		}
	}
	return v, nil
}

// computeWithCounts fills a compute's read-only node fields from the
// number of its nodes in each state.
func computeWithCounts(c api.Compute, counts map[string]int) api.Compute {
	c = c.Redacted()
	p := *c.Aml()
	p.NodeStateCounts, p.CurrentNodeCount = api.CountNodes(counts)
	p.AllocationState = api.AllocationStateOf(p.CurrentNodeCount, p.TargetNodeCount, p.NodeStateCounts)
	if p.Subnet == nil && p.EnableNodePublicIP != nil && *p.EnableNodePublicIP {
		// The default (true), answered only when it says something: a
		// compute read back with enableNodePublicIp and no subnet is one
		// azure-ai-ml before 1.5 cannot send again (get, change,
		// begin_create_or_update fails in its _set_full_subnet_name).
		p.EnableNodePublicIP = nil
	}
	c.Properties.Properties = &p
	return c
}

// NodeInfo renders a node as listNodes does; runId is the name of the
// job it runs (jobName), as on Azure ML, where a job's name is its run id.
// rankEnded says the node's rank of that job has ended (the node is held
// for the job until it ends).
func NodeInfo(n store.Node, jobName string, rankEnded bool) api.NodeInfo {
	info := api.NodeInfo{NodeID: n.ID, PrivateIPAddress: n.Address, Port: int32(n.Port), NodeState: n.State}
	if n.Port > 0 && n.PublicSSH {
		addr := n.Address
		info.PublicIPAddress = &addr
	}
	if jobName != "" {
		info.RunID = &jobName
		info.RankEnded = rankEnded
	}
	info.GPUs = n.GPUDevices
	if len(info.GPUs) == 0 {
		for _, i := range n.GPUs {
			info.GPUs = append(info.GPUs, strconv.Itoa(i))
		}
	}
	return info
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.computeOf(r, p)
	if err != nil {
		return err
	}
	nodes, err := store.NodesOf(r.Context(), s.db.Q(), d.Value.ID)
	if err != nil {
		return err
	}
	skip, err := skipParam(r)
	if err != nil {
		return err
	}
	size := s.pageSize(r)
	page := api.NodesPage{Nodes: []api.NodeInfo{}}
	for i := skip; i < len(nodes) && i < skip+size; i++ {
		name, ended := "", false
		if uid := nodes[i].JobID; uid != "" {
			name = uid // a job that is gone: its id is all there is
			if j, err := store.GetJobByUID(r.Context(), s.db.Q(), uid); err == nil {
				name = j.Doc.Name
				_, ended = j.Exits[nodes[i].ID]
				ended = ended && !api.JobTerminal(j.Doc.Properties.Status)
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		page.Nodes = append(page.Nodes, NodeInfo(nodes[i], name, ended))
	}
	if skip+size < len(nodes) {
		page.NextLink = s.nextLink(r, "$skip", strconv.Itoa(skip+size))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
