package server_test

import (
	"strings"
	"testing"
)

// TestOperationOfAnotherWorkspaceIsNotFound: the status and result of a
// long-running operation (a compute's creation, a job's cancel) answer
// only a caller who may read what it acts on; to anyone else who knows
// its id they are 404, as an unknown id is (before: 200 and 204).
func TestOperationOfAnotherWorkspaceIsNotFound(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ws2 := wsPath(hRG, "ws2")
	h.do("PUT", ws2, map[string]any{"location": hLoc}).want(t, 201)
	other := h.user("other-team", "Contributor", ws2)
	reader := h.user("reader", "Reader", hWSPath)

	create := h.do("PUT", computePath("cpu"), computeBody()).want(t, 201)
	status := create.Header.Get("Azure-AsyncOperation")
	h.waitOp(status)
	result := strings.Replace(status, "/operationStatuses/", "/operationResults/", 1)
	h.do("PUT", hWSPath+"/jobs/j", jobBody("cpu")).want(t, 201)
	cancel := h.do("POST", hWSPath+"/jobs/j/cancel", nil).want(t, 202).Header.Get("Azure-AsyncOperation")

	for _, link := range []string{status, result, cancel} {
		h.as(other, "GET", link, nil).want(t, 404, "ResourceNotFound")
		if r := h.as(reader, "GET", link, nil); r.Status != 200 && r.Status != 202 && r.Status != 204 {
			t.Errorf("a reader of the workspace polls %s: %d %s", link, r.Status, r.Body)
		}
	}
	unknown := strings.Replace(status, status[strings.LastIndex(status, "/")+1:strings.Index(status, "?")], "00000000-0000-0000-0000-000000000000", 1)
	h.as(other, "GET", unknown, nil).want(t, 404, "ResourceNotFound")
}
