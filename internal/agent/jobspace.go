package agent

import (
	"fmt"
	"os"
	"path/filepath"
)

// What an isolated job (one with a job user) sees of the machine besides
// its folder (sandbox.go masks the rest): the job init sets it up in the
// job's mount namespace before it drops to the job user.
//
//   - /tmp is the node's own (tmp in the agent's work dir, the job user's
//     alone): what one node's jobs leave there no other node's job sees, it
//     goes with the node, and the agent empties it before a job of another
//     owner than the last one's runs.
//   - /dev/shm is the job's own memory (a tmpfs of the job's namespace, of
//     resources.shmSize, 2 GiB by default, as Azure ML gives): the job's
//     processes share it (NCCL, DataLoader workers) and it is gone when
//     the job ends.
//   - /proc is a proc of the namespace's own, mounted hidepid=invisible:
//     the job sees its own processes, not other jobs', nodes' or agents'
//     (their command lines included); the job init's command line holds
//     nothing of the job anyway (its spec comes on a descriptor).
//   - The job user is a user: /etc/passwd and /etc/group are the machine's
//     with an entry for the job user and its group (named cumulus-job, home
//     the job's folder) when it has none, as container runtimes give an
//     arbitrary uid; USER and LOGNAME name it, HOME is its home. Programs
//     that ask who they run as (getpwuid, getpass.getuser, id, ssh) get an
//     answer. The files are root's in the namespace: the job cannot change
//     what its own user, or root, is.

// privateTmp is the folder of the work dir that becomes an isolated job's
// /tmp.
const privateTmp = "tmp"

// prepareJobSpace makes the node's private /tmp, the job user's alone.
func (a *agent) prepareJobSpace() error {
	cred := a.jobCred
	for _, name := range []string{privateTmp} {
		d := filepath.Join(a.cfg.WorkDir, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("private /%s: %w", name, err)
		}
		if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("private /%s: %w", name, err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("private /%s: %w", name, err)
		}
	}
	return nil
}

// freshJobSpace empties the node's private /tmp before a job
// of owner runs, when the last job here had another owner (or none is
// known since the agent started). Only the job user writes there, and
// none of its processes outlive a job.
func (a *agent) freshJobSpace(owner string) error {
	if a.jobCred == nil {
		return nil
	}
	a.mu.Lock()
	same := a.spaceOwner != "" && a.spaceOwner == owner
	a.mu.Unlock()
	if same {
		return nil
	}
	for _, name := range []string{privateTmp} {
		if err := emptyDir(filepath.Join(a.cfg.WorkDir, name)); err != nil {
			return fmt.Errorf("empty the private /%s: %w", name, err)
		}
	}
	a.mu.Lock()
	a.spaceOwner = owner
	a.mu.Unlock()
	return nil
}
