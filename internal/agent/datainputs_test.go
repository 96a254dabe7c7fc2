package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Code and inputs in the blob store are downloaded file by file into the
// working directory and inputs/<name> (a file input's variable names the
// file), each file checked against its digest, before the command runs;
// the assignment's notes head the log.
func TestDataInputsDownloaded(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	train, a, b := f.addBlob([]byte("print('hi')\n")), f.addBlob([]byte("3\n")), f.addBlob([]byte("4\n"))
	f.set(func(f *fakeServer) {
		f.fileLists["data/code/files"] = agentapi.FileList{Files: []agentapi.ListedFile{{Path: "pkg/train.py", Digest: train, Size: 12}}}
		f.fileLists["data/inputs/nums/files"] = agentapi.FileList{Files: []agentapi.ListedFile{{Path: "a.txt", Digest: a}, {Path: "deep/b.txt", Digest: b}}}
		f.fileLists["data/inputs/one/files"] = agentapi.FileList{Files: []agentapi.ListedFile{{Path: "b.txt", Digest: b}}}
	})
	f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: "data", Attempt: 1, CodeFiles: true,
		DataInputs: map[string]agentapi.DataInput{"nums": {}, "one": {File: true}}, Notes: []string{"cumulus: a note"},
		Command: `cat pkg/train.py "$AZUREML_INPUT_nums/a.txt" "$AZUREML_INPUT_nums/deep/b.txt" "$AZUREML_INPUT_one"`}})
	if ev := f.exited("data", 10*time.Second); ev.ExitCode != 0 {
		t.Fatalf("event = %+v", ev)
	}
	if got := f.logOf("data"); got != "cumulus: a note\nprint('hi')\n3\n4\n4\n" {
		t.Errorf("log = %q", got)
	}
}

// A file whose content is not its digest, or a listed path that climbs
// out of its folder, fails the job before its command runs.
func TestDataInputsChecked(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t)
	startAgent(t, f, nil)
	good := f.addBlob([]byte("good"))
	wrong := strings.Repeat("cd", 32)
	f.set(func(f *fakeServer) {
		f.blobs[wrong] = []byte("not it")
		f.fileLists["bad/inputs/x/files"] = agentapi.FileList{Files: []agentapi.ListedFile{{Path: "a", Digest: wrong}}}
		f.fileLists["climb/inputs/x/files"] = agentapi.FileList{Files: []agentapi.ListedFile{{Path: "../../escape", Digest: good}}}
	})
	for _, uid := range []string{"bad", "climb"} {
		f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: uid, Attempt: 1, DataInputs: map[string]agentapi.DataInput{"x": {}}, Command: "echo never"}})
		ev := f.exited(uid, 10*time.Second)
		if ev.ExitCode != exitNotRun || !strings.Contains(ev.Reason, "input x download failed") {
			t.Errorf("%s: event = %+v", uid, ev)
		}
		if got := f.logOf(uid); got != "" {
			t.Errorf("%s: the command ran: %q", uid, got)
		}
	}
}
