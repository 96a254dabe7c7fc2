package parallel

import (
	"strings"
	"testing"
	"time"
)

func TestRetryUpToMaxRetries(t *testing.T) {
	s := Settings{MaxRetries: 2}
	for tries, want := range map[int]bool{1: true, 2: true, 3: false} {
		if got := Retry(tries, s); got != want {
			t.Errorf("after %d failed tries: retry %v, want %v", tries, got, want)
		}
	}
	if Retry(1, Settings{MaxRetries: 0}) {
		t.Error("max_retries 0 runs a mini-batch once")
	}
}

func TestVerdictThresholds(t *testing.T) {
	one := Settings{MiniBatchErrorThreshold: 1, ErrorThreshold: -1, AllowedFailedPercent: 100}
	if failed, _ := Verdict(Counts{Total: 8, Failed: 1, FailedItems: 5}, one); failed {
		t.Error("one failed mini-batch is within mini_batch_error_threshold 1")
	}
	if failed, why := Verdict(Counts{Total: 8, Failed: 2}, one); !failed || !strings.Contains(why, "mini_batch_error_threshold 1") {
		t.Errorf("two failed: %v %q", failed, why)
	}
	ignore := Settings{MiniBatchErrorThreshold: -1, ErrorThreshold: -1, AllowedFailedPercent: 100}
	if failed, _ := Verdict(Counts{Total: 8, Failed: 8, FailedItems: 40}, ignore); failed {
		t.Error("-1 ignores failures")
	}
	items := Settings{MiniBatchErrorThreshold: -1, ErrorThreshold: 4, AllowedFailedPercent: 100}
	if failed, why := Verdict(Counts{Total: 8, Failed: 1, FailedItems: 5}, items); !failed || !strings.Contains(why, "5 items") {
		t.Errorf("items: %v %q", failed, why)
	}
	pct := Settings{MiniBatchErrorThreshold: -1, ErrorThreshold: -1, AllowedFailedPercent: 30}
	if failed, _ := Verdict(Counts{Total: 10, Failed: 3}, pct); failed {
		t.Error("30% of 10 is 3")
	}
	if failed, _ := Verdict(Counts{Total: 10, Failed: 4}, pct); !failed {
		t.Error("4 of 10 is over 30%")
	}
}

func TestProgress(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, left := Progress(Counts{Total: 10}, t0, t0.Add(time.Second)); left != -1 {
		t.Errorf("nothing ended: left %v", left)
	}
	rate, left := Progress(Counts{Total: 10, Done: 3, Failed: 1}, t0, t0.Add(2*time.Second))
	if rate != 2 || left != 3*time.Second {
		t.Errorf("rate %v left %v, want 2/s and 3s", rate, left)
	}
	if !Finished(Counts{Total: 2, Done: 1, Failed: 1}) || Finished(Counts{Total: 2, Done: 1, Running: 1}) || Finished(Counts{}) {
		t.Error("Finished")
	}
}
