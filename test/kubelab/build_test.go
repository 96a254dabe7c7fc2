package kubelab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// Start waits for a build of the tools under way (scripts/kube-tools.sh
// holds build.lock) and goes on once it ends; it gives up after BuildWait,
// pointing at the build's log, or when its caller's context ends. No lock
// file: no wait.
func TestWaitForBuild(t *testing.T) {
	dir := t.TempDir()
	if err := waitForBuild(context.Background(), dir); err != nil {
		t.Fatalf("no build ever started: %v; want nil at once", err)
	}
	lock, err := os.Create(filepath.Join(dir, "build.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil { // a build under way
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- waitForBuild(context.Background(), dir) }()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("waitForBuild returned %v while the build held its lock", err)
		default:
		}
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil { // the build ends
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("waitForBuild after the build = %v; want nil", err)
			}
		default:
			t.Fatal("waitForBuild still waits after the build released its lock")
		}
	})
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		err := waitForBuild(context.Background(), dir)
		if err == nil || !strings.Contains(err.Error(), "build.log") {
			t.Errorf("waitForBuild with a build that never ends = %v; want an error pointing at its log", err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		err := waitForBuild(ctx, dir)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Minute {
			t.Errorf("waitForBuild with a context that ended after a minute = %v after %s; want the context's error at once", err, time.Since(start))
		}
	})
}
