package lazyjson

import (
	"encoding/json"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// A job as a CLI submits it, and as the server answers.
var benchJob = api.Job{Name: "j", Properties: api.JobProperties{
	JobType: "Command", Command: "python train.py --epochs 3", ComputeID: "azureml:gpu", EnvironmentID: "azureml:torch@latest",
	Tags: map[string]string{"team": "vision", "run": "7"}, Status: "Queued",
}}

// The warm cost of each against json's (its caches set up): what a
// long-running client pays per request.
func BenchmarkJobEncode(b *testing.B) {
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(benchJob); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lazyjson", func(b *testing.B) {
		for b.Loop() {
			if _, err := Marshal(benchJob); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkJobDecode(b *testing.B) {
	data, err := json.Marshal(benchJob)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			var j api.Job
			if err := json.Unmarshal(data, &j); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lazyjson", func(b *testing.B) {
		for b.Loop() {
			var j api.Job
			if err := Unmarshal(data, &j); err != nil {
				b.Fatal(err)
			}
		}
	})
}
