package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/config"
)

// job stream prints every status change of the server's history, Running
// included, stamped with the server's times (not when the client saw them),
// each attempt's log, and before the second attempt why the first ended.
func TestStreamUsesServerHistory(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2021, 3, 4, 10, m, 0, 0, time.UTC) }
	t1, t2 := at(3), at(9)
	j := api.Job{Name: "j", Properties: api.JobProperties{Status: api.JobCompleted,
		History: []api.StatusChange{{Status: "NotStarted", Time: at(0)}, {Status: "Queued", Time: at(1)}, {Status: "Running", Time: at(2)},
			{Status: "Queued", Time: at(4), Reason: "node lost"}, {Status: "Running", Time: at(5)}, {Status: "Completed", Time: at(10)}},
		Attempts: []api.Attempt{{Number: 1, Nodes: []string{"n1"}, Ended: &t1, Reason: "node n1 lost: no heartbeat for 60s"},
			{Number: 2, Nodes: []string{"n2"}, Ended: &t2}}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/logs") {
			off := r.URL.Query().Get("offset")
			c := api.LogChunk{Offset: 0}
			if off == "0" {
				c.Content = "log of attempt " + r.URL.Query().Get("attempt") + "\n"
			}
			json.NewEncoder(w).Encode(c)
			return
		}
		json.NewEncoder(w).Encode(j)
	}))
	defer srv.Close()
	c, err := client.New(config.CLI{Server: srv.URL, Token: "t", Subscription: "s", ResourceGroup: "g", Workspace: "w"})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	g := &globals{stdout: &out, stderr: &errb}
	if err := streamJob(context.Background(), g, c, "j"); err != nil {
		t.Fatal(err)
	}
	stamp := func(m int) string { return at(m).Local().Format("15:04:05") }
	want := strings.Join([]string{
		fmt.Sprintf("[%s] NotStarted", stamp(0)), fmt.Sprintf("[%s] Queued", stamp(1)), fmt.Sprintf("[%s] Running", stamp(2)),
		fmt.Sprintf("[%s] Queued: node lost", stamp(4)), fmt.Sprintf("[%s] Running", stamp(5)),
		"--- attempt 2 (attempt 1 ended: node n1 lost: no heartbeat for 60s) ---",
		fmt.Sprintf("[%s] Completed", stamp(10)), ""}, "\n")
	if errb.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errb.String(), want)
	}
	if out.String() != "log of attempt 2\n" {
		t.Errorf("stdout = %q", out.String())
	}
}
