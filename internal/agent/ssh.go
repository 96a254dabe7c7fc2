package agent

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/crypto/ssh"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// The node's SSH server: when the cluster has an admin account, the agent
// lets that user in (by key and/or password) to a shell in the node's
// working environment. While a session is open the node counts as busy,
// so it is not scaled down under someone debugging on it.

type sshServer struct {
	port     int
	sessions atomic.Int32
}

// startSSH starts the SSH server once, when the cluster has an admin account.
func (a *agent) startSSH(cfg *agentapi.SSHConfig) {
	if cfg == nil || cfg.User == "" || (cfg.AuthorizedKey == "" && cfg.PasswordHash == "") {
		return
	}
	a.sshOnce.Do(func() {
		srv, err := a.serveSSH(cfg)
		if err != nil {
			a.logger().Error("SSH server not started", "err", err)
			return
		}
		a.mu.Lock()
		a.ssh = srv
		a.mu.Unlock()
		a.logger().Info("SSH server listening", "port", srv.port, "user", cfg.User)
		go a.reportSSH(context.Background())
	})
}

func (a *agent) serveSSH(cfg *agentapi.SSHConfig) (*sshServer, error) {
	hostKey, err := a.hostKey()
	if err != nil {
		return nil, err
	}
	var authorized ssh.PublicKey
	if cfg.AuthorizedKey != "" {
		if authorized, _, _, _, err = ssh.ParseAuthorizedKey([]byte(cfg.AuthorizedKey)); err != nil {
			return nil, fmt.Errorf("admin public key: %w", err)
		}
	}
	conf := &ssh.ServerConfig{
		PublicKeyCallback: func(c ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if c.User() == cfg.User && authorized != nil && string(k.Marshal()) == string(authorized.Marshal()) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("key not authorized")
		},
		PasswordCallback: func(c ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
			if c.User() == cfg.User && cfg.PasswordHash != "" && bcrypt.CompareHashAndPassword([]byte(cfg.PasswordHash), pw) == nil {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("password refused")
		},
	}
	conf.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", net.JoinHostPort(a.cfg.Address, "0"))
	if err != nil {
		return nil, err
	}
	srv := &sshServer{port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		<-a.life.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go a.sshConn(c, conf, srv)
		}
	}()
	return srv, nil
}

// hostKey is the node's ed25519 host key, kept in the work dir.
func (a *agent) hostKey() (ssh.Signer, error) {
	path := filepath.Join(a.cfg.WorkDir, "ssh_host_ed25519_key")
	if b, err := os.ReadFile(path); err == nil {
		return ssh.ParsePrivateKey(b)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	blk, err := ssh.MarshalPrivateKey(priv, "cumulus node")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}

func (a *agent) sshConn(c net.Conn, conf *ssh.ServerConfig, srv *sshServer) {
	conn, chans, reqs, err := ssh.NewServerConn(c, conf)
	if err != nil {
		c.Close()
		return
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	a.logger().Info("SSH session opened", "user", conn.User(), "remote", conn.RemoteAddr().String())
	srv.sessions.Add(1)
	go a.reportSSH(context.Background())
	defer func() {
		srv.sessions.Add(-1)
		a.logger().Info("SSH session closed", "user", conn.User())
		go a.reportSSH(context.Background())
	}()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions are served")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			continue
		}
		go a.sshSession(ch, requests)
	}
}

// sshSession runs an exec or shell request in the node's work directory.
func (a *agent) sshSession(ch ssh.Channel, requests <-chan *ssh.Request) {
	defer ch.Close()
	for req := range requests {
		switch req.Type {
		case "pty-req", "env", "window-change":
			_ = req.Reply(true, nil)
		case "exec", "shell":
			command := ""
			if req.Type == "exec" && len(req.Payload) >= 4 {
				n := binary.BigEndian.Uint32(req.Payload)
				if int(n) <= len(req.Payload)-4 {
					command = string(req.Payload[4 : 4+n])
				}
			}
			_ = req.Reply(true, nil)
			code := a.sshRun(ch, command)
			status := make([]byte, 4)
			binary.BigEndian.PutUint32(status, uint32(code))
			_, _ = ch.SendRequest("exit-status", false, status)
			return
		default:
			_ = req.Reply(false, nil)
		}
	}
}

// sshRun runs a session's command (or an interactive shell). On a node
// whose jobs run as a job user, the session runs as that user in the jobs'
// isolated space (sandbox.go, jobspace.go), in the folder of the job that
// runs (else of the node's jobs): the admin account debugs what the jobs
// see, not the machine.
func (a *agent) sshRun(ch ssh.Channel, command string) int {
	args := []string{"-i"}
	if command != "" {
		args = []string{"-c", command}
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.Dir = a.cfg.WorkDir
	cmd.Env = append(agentEnvWithoutSecrets(), "CUMULUS_NODE_ID="+a.node())
	if a.jobCred != nil {
		dir, _ := filepath.Abs(filepath.Join(a.cfg.WorkDir, "jobs"))
		a.mu.Lock()
		if a.current != nil {
			dir, _ = filepath.Abs(a.current.dir) // the job running now
		}
		a.mu.Unlock()
		spec := jobinit.Spec{Stdin: true, Dir: dir, Path: "/bin/sh", Args: args}
		a.asJobUser(&spec)
		c, err := initProcess(context.Background(), spec)
		if err != nil {
			fmt.Fprintln(ch.Stderr(), "cumulus:", err)
			return 127
		}
		defer closeSpec(c)
		c.Dir, c.Env = dir, append(jobBaseEnv(dir), "CUMULUS_NODE_ID="+a.node())
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: jobinit.DeathSignal, Cloneflags: syscall.CLONE_NEWNS}
		cmd = c
		runtime.LockOSThread() // the init's parent-death signal follows this thread
		defer runtime.UnlockOSThread()
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		fmt.Fprintln(ch.Stderr(), "cumulus:", err)
		return 127
	}
	return 0
}

// reportSSH tells the server the SSH port and how many sessions are open,
// at once (a poll may be held for a while).
func (a *agent) reportSSH(ctx context.Context) {
	a.mu.Lock()
	srv := a.ssh
	a.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := a.retry(ctx, a.logger(), "report SSH sessions", func(ctx context.Context) error {
		return a.c.do(ctx, request{method: http.MethodPost, path: agentapi.Prefix + "/ssh",
			json: agentapi.PollRequest{NodeID: a.node(), SSHPort: srv.port, SSHSessions: int(srv.sessions.Load())}}, nil)
	})
	if err != nil {
		a.logger().Warn("could not report SSH sessions", "err", err)
	}
}
