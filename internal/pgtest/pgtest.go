// Package pgtest gives tests a private, real PostgreSQL: DSN makes a fresh,
// empty database for one test on a server that this test process starts
// itself (initdb into a temporary directory, postgres on a free loopback
// port) the first time it is asked for one.
//
// A package that uses DSN runs its tests through Run, so the server is shut
// down and its directory removed when the tests end:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
//
// Without Run, DSN still works: the server is a child that the kernel kills
// when the test process exits (Pdeathsig), but its directory is left behind
// in the temporary directory.
//
// Where PostgreSQL is not installed DSN skips the test, unless
// CUMULUS_REQUIRE_POSTGRES=1 (scripts/test.sh sets it), where it fails: a
// missing PostgreSQL must not silently skip a whole store's tests in CI.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/freeport"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// RequireEnv names the variable that turns a missing PostgreSQL from a skip
// into a failure.
const RequireEnv = "CUMULUS_REQUIRE_POSTGRES"

// superuser is the role initdb creates; with --auth=trust it needs no
// password.
const superuser = "cumulus"

// startTimeout bounds how long the server may take to accept connections.
const startTimeout = 30 * time.Second

// errNotInstalled marks a missing PostgreSQL, the one start error that may
// skip rather than fail.
var errNotInstalled = errors.New("PostgreSQL is not installed")

type server struct {
	dir   string // removed by stop
	port  int
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd has been waited for
	log   string        // path of the server's log
	admin *sql.DB       // connected to the maintenance database "postgres"
}

var (
	once     sync.Once
	srv      *server
	startErr error
	dbSeq    atomic.Int64
)

// Run runs the tests of m and then stops the server, if one was started.
// It returns m.Run's exit code, for TestMain to pass to os.Exit.
func Run(m *testing.M) int {
	code := m.Run()
	if srv != nil {
		srv.stop()
	}
	return code
}

// Server returns the DSN of the shared server's maintenance database
// "postgres", for tests that create and drop their own databases. It starts
// the server on first use and skips or fails t as the package comment says
// where PostgreSQL is missing.
func Server(t testing.TB) (adminDSN string) {
	t.Helper()
	s := get(t)
	return s.dsn("postgres")
}

// DSN creates a fresh, empty database for t on the shared server and returns
// its postgres:// DSN (for the "pgx" database/sql driver or pgx itself). The
// database is dropped when t ends, with any connections still open to it.
func DSN(t testing.TB) string {
	t.Helper()
	s := get(t)
	name := fmt.Sprintf("t%d_%s", dbSeq.Add(1), sanitize(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := s.admin.ExecContext(ctx, "CREATE DATABASE "+quoteIdent(name)); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		if _, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return s.dsn(name)
}

// get starts the server once per process and reports its error to t.
func get(t testing.TB) *server {
	t.Helper()
	once.Do(func() { srv, startErr = start() })
	if startErr != nil {
		if errors.Is(startErr, errNotInstalled) && os.Getenv(RequireEnv) != "1" {
			t.Skipf("pgtest: %v (set %s=1 to fail instead)", startErr, RequireEnv)
		}
		t.Fatalf("pgtest: %v", startErr)
	}
	return srv
}

func (s *server) dsn(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuser, s.port, db)
}

// binDir finds the directory holding initdb and postgres: PATH first, then
// the newest Debian-style /usr/lib/postgresql/<version>/bin.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if isExec(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		if isExec(filepath.Join(dir, "initdb")) && isExec(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w: no initdb and postgres on PATH or in /usr/lib/postgresql/*/bin", errNotInstalled)
}

// version is the numeric major version in /usr/lib/postgresql/<v>/bin, 0
// where it is not a number.
func version(bin string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(bin)), 64)
	return v
}

func isExec(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// credential is who initdb and postgres run as: PostgreSQL refuses to run
// as root, so under root they run as nobody; otherwise as the current user
// (nil).
func credential() *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, gid := uint32(65534), uint32(65534)
	if u, err := user.Lookup("nobody"); err == nil {
		if n, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
			uid = uint32(n)
		}
		if n, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
			gid = uint32(n)
		}
	}
	return &syscall.Credential{Uid: uid, Gid: gid, NoSetGroups: true}
}

// start runs initdb and then postgres, retrying on another port if the
// free port it picked was taken in the meantime.
func start() (*server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred := credential()
	dir, err := os.MkdirTemp("", "cumulus-pgtest-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	// MkdirTemp makes the directory 0700; the server's user must get
	// through it to its data and socket directories.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}

	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "--auth=trust",
		"-U", superuser, "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}

	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := launch(bin, dir, data, sock, cred)
		if err == nil {
			ok = true
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// launch starts postgres on a free loopback port and waits until it accepts
// connections.
func launch(bin, dir, data, sock string, cred *syscall.Credential) (*server, error) {
	port, err := freeport.One()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "postgres.log")
	if p := os.Getenv("CUMULUS_PGTEST_LOG"); p != "" {
		logPath = p // kept after the run, for looking into a slow test
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	args := []string{"-D", data,
		"-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(port), "-k", sock,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300"}
	// CUMULUS_PGTEST_SETTINGS adds server settings, e.g.
	// "log_min_duration_statement=10" to log slow statements.
	for _, kv := range strings.Fields(os.Getenv("CUMULUS_PGTEST_SETTINGS")) {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: the server dies with this process even where no TestMain
	// calls Run. It follows the thread that started it; the Go runtime does
	// not end threads a goroutine has not locked, so that is this process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &server{dir: dir, port: port, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { cmd.Wait(); close(s.done) }()

	admin, err := sql.Open("pgx", s.dsn("postgres"))
	if err != nil {
		s.kill()
		return nil, err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = admin.PingContext(ctx)
		cancel()
		if err == nil {
			s.admin = admin
			return s, nil
		}
		select {
		case <-s.done:
			admin.Close()
			return nil, fmt.Errorf("postgres exited while starting (%v); its log:\n%s", cmd.ProcessState, tail(logPath))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			admin.Close()
			s.kill()
			return nil, fmt.Errorf("postgres did not accept connections within %v (%v); its log:\n%s", startTimeout, err, tail(logPath))
		}
	}
}

// stop shuts the server down (SIGINT: fast shutdown, which disconnects
// clients) and removes its directory.
func (s *server) stop() {
	if s.admin != nil {
		s.admin.Close()
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.kill()
	}
	os.RemoveAll(s.dir)
}

func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.done
}

// tail is the end of the server's log, for errors.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// sanitize turns a test name into something readable in a database name,
// short enough that with its prefix it stays under PostgreSQL's 63 bytes.
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
