// Package nodeimage builds the container image the docker provider runs as
// a node, from files on this machine alone (no registry): FROM scratch, the
// cumulus binary (static), busybox for /bin/sh and the common tools, and
// the docker CLI so that the agent inside can start job containers through
// the host's Docker socket.
package nodeimage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// DefaultTag is the node image `cumulus serve --provider docker` runs.
const DefaultTag = "cumulus-node:latest"

// Paths inside the image and its labels.
const (
	BinaryPath = "/usr/local/bin/cumulus" // the entrypoint: BinaryPath agent
	// LabelBinarySHA256 is the sha256 of the cumulus binary the image was
	// built from, to tell a stale image from a current one.
	LabelBinarySHA256 = "cumulus.binary-sha256"
	// LabelDockerCLI is the version of the docker CLI inside.
	LabelDockerCLI = "cumulus.docker-cli"
)

// ErrNotFound is returned (wrapped) by Inspect when there is no such image.
var ErrNotFound = errors.New("node image not found")

// Options configure a build; only Tag has to be set.
type Options struct {
	Tag string // default DefaultTag
	// Binary is the cumulus binary to put in the image; it must be
	// statically linked. Default: the running executable.
	Binary string
	// DockerCLI is the docker client to put in the image. Default: the
	// first statically linked one of "docker" on PATH,
	// /usr/local/bin/docker and /usr/bin/docker, else the first found,
	// copied with the shared libraries and loader it needs.
	DockerCLI string
	// Busybox is a statically linked busybox. Default: "busybox" on PATH,
	// else /bin/busybox.
	Busybox string
	// Docker is the CLI that runs the build. Default "docker".
	Docker string
	Log    *slog.Logger
}

// Build builds the node image tag from the cumulus binary at binary ("" for
// the running executable) and checks that it works: the binary runs, and
// the docker CLI inside reaches the host's engine.
func Build(ctx context.Context, tag, binary string, log *slog.Logger) error {
	return BuildWith(ctx, Options{Tag: tag, Binary: binary, Log: log})
}

// BuildWith is Build with every choice open.
func BuildWith(ctx context.Context, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	release, err := lockBuilds(ctx, DockerSocket())
	if err != nil {
		return err
	}
	defer release()
	start := time.Now()
	dir, err := os.MkdirTemp("", "cumulus-node-image-")
	if err != nil {
		return fmt.Errorf("node image: %w", err)
	}
	defer os.RemoveAll(dir)
	sum, cliVersion, err := o.writeContext(ctx, dir)
	if err != nil {
		return fmt.Errorf("node image: %w", err)
	}
	o.Log.Info("building the node image", "tag", o.Tag, "binary", o.Binary, "docker_cli", o.DockerCLI, "busybox", o.Busybox)
	previous, _ := inspect(ctx, o.Docker, o.Tag)
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if _, err := run(bctx, o.Docker, "build", "--quiet", "--tag", o.Tag, "--label", LabelBinarySHA256+"="+sum,
		"--label", LabelDockerCLI+"="+cliVersion, dir); err != nil {
		return fmt.Errorf("node image: docker build: %w", err)
	}
	if err := verify(ctx, o.Docker, o.Tag); err != nil {
		vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, _ = run(vctx, o.Docker, "image", "rm", "--force", o.Tag)
		return fmt.Errorf("node image %s does not work, removed it: %w", o.Tag, err)
	}
	if img, err := inspect(ctx, o.Docker, o.Tag); err == nil && previous.ID != "" && previous.ID != img.ID {
		// The image the tag named before is left untagged: remove it,
		// unless containers still use it.
		_, _ = run(ctx, o.Docker, "image", "rm", previous.ID)
	}
	o.Log.Info("node image built", "tag", o.Tag, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func (o *Options) defaults() error {
	if o.Tag == "" {
		o.Tag = DefaultTag
	}
	if o.Docker == "" {
		o.Docker = "docker"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("node image: find the running cumulus binary: %w", err)
		}
		o.Binary = exe
	}
	static, err := isStatic(o.Binary)
	if err != nil {
		return fmt.Errorf("node image: cumulus binary %s: %w", o.Binary, err)
	}
	if !static {
		return fmt.Errorf("node image: the cumulus binary %s is dynamically linked, and the node image (FROM scratch) needs a static one: "+
			"build it with 'CGO_ENABLED=0 go build -o bin/cumulus ./cmd/cumulus' and run 'bin/cumulus node-image build' "+
			"(or start 'bin/cumulus serve' from it)", o.Binary)
	}
	if o.Busybox == "" {
		o.Busybox = "/bin/busybox"
		if p, err := exec.LookPath("busybox"); err == nil {
			o.Busybox = p
		}
	}
	if static, err := isStatic(o.Busybox); err != nil || !static {
		return fmt.Errorf("node image: a statically linked busybox is needed (%s: static %v, %v): install it with 'apt-get install busybox-static'",
			o.Busybox, static, err)
	}
	if o.DockerCLI == "" {
		cli, err := findDockerCLI()
		if err != nil {
			return err
		}
		o.DockerCLI = cli
	}
	return nil
}

// findDockerCLI picks the docker client to put in the image: a static one
// if there is one, else the first found.
func findDockerCLI() (string, error) {
	var found []string
	if p, err := exec.LookPath("docker"); err == nil {
		found = append(found, p)
	}
	for _, p := range []string{"/usr/local/bin/docker", "/usr/bin/docker"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return "", errors.New("node image: no docker CLI found to put in the image: install docker.io")
	}
	for _, p := range found {
		if static, err := isStatic(p); err == nil && static {
			return p, nil
		}
	}
	return found[0], nil
}

// isStatic reports whether an ELF executable needs no program interpreter
// (dynamic loader).
func isStatic(file string) (bool, error) {
	f, err := elf.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

const dockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
LABEL org.opencontainers.image.title="cumulus-node" \
      org.opencontainers.image.description="Cumulus node: the cumulus agent, busybox and the docker CLI"
ENTRYPOINT ["/usr/local/bin/cumulus", "agent"]
`

// writeContext lays out the build context in dir: the Dockerfile and one
// rootfs/ folder copied into the image in one layer (no RUN step, so the
// build needs no container). It returns the binary's sha256 and the
// docker CLI's version.
func (o *Options) writeContext(ctx context.Context, dir string) (sum, cliVersion string, err error) {
	root := filepath.Join(dir, "rootfs")
	put := func(dst, src string, mode os.FileMode) error {
		return copyFile(filepath.Join(root, dst), src, mode)
	}
	if sum, err = FileSHA256(o.Binary); err != nil {
		return "", "", err
	}
	if err := put(BinaryPath, o.Binary, 0o755); err != nil {
		return "", "", err
	}
	if err := put("/bin/busybox", o.Busybox, 0o755); err != nil {
		return "", "", err
	}
	applets, err := busyboxApplets(ctx, o.Busybox)
	if err != nil {
		return "", "", err
	}
	files, err := dockerCLIFiles(ctx, o.DockerCLI)
	if err != nil {
		return "", "", err
	}
	for _, f := range files {
		if err := put(f.dst, f.src, 0o755); err != nil {
			return "", "", err
		}
	}
	for _, a := range applets {
		dst := filepath.Join(root, a)
		if _, err := os.Lstat(dst); err == nil {
			continue // busybox itself, or a real file in its place
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", "", err
		}
		if err := os.Symlink("/bin/busybox", dst); err != nil {
			return "", "", err
		}
	}
	etc := map[string]string{
		"etc/passwd":        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":         "root:x:0:\nnogroup:x:65534:\n",
		"etc/nsswitch.conf": "hosts: files dns\n",
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", "", err
	}
	for name, text := range etc {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", "", err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return "", "", err
		}
	}
	// CA roots, so that an agent can reach a server with a public
	// certificate.
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		if err := put("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt", 0o644); err != nil {
			return "", "", err
		}
	}
	for name, mode := range map[string]os.FileMode{"tmp": 0o777 | os.ModeSticky, "root": 0o700, "var/run": 0o755} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", "", err
		}
		if err := os.Chmod(p, mode); err != nil {
			return "", "", err
		}
	}
	out, err := run(ctx, o.DockerCLI, "version", "--format", "{{.Client.Version}}")
	if v := strings.TrimSpace(string(out)); v != "" {
		return sum, v, nil // the client answers even when the engine does not
	}
	return "", "", fmt.Errorf("%s version: %w", o.DockerCLI, err)
}

// busyboxApplets lists where busybox's applets go (usr/bin/env, bin/sh, …).
func busyboxApplets(ctx context.Context, busybox string) ([]string, error) {
	out, err := run(ctx, busybox, "--list-full")
	if err != nil {
		return nil, fmt.Errorf("busybox --list-full: %w", err)
	}
	var applets []string
	for _, l := range strings.Fields(string(out)) {
		l = path.Clean("/" + l)
		if l != "/" && !strings.Contains(l, "..") {
			applets = append(applets, l)
		}
	}
	if len(applets) == 0 {
		return nil, errors.New("busybox --list-full listed no applets")
	}
	return applets, nil
}

type file struct{ src, dst string }

// dockerCLIFiles is what the docker CLI at cli needs in the image: itself,
// and, when it is dynamically linked, its loader and the libraries ldd
// lists, at the same paths as here.
func dockerCLIFiles(ctx context.Context, cli string) ([]file, error) {
	p, err := exec.LookPath(cli)
	if err != nil {
		return nil, fmt.Errorf("docker CLI %s: %w", cli, err)
	}
	static, err := isStatic(p)
	if err != nil {
		return nil, fmt.Errorf("docker CLI %s: %w", p, err)
	}
	if static {
		return []file{{src: p, dst: "/usr/local/bin/docker"}}, nil
	}
	out, err := run(ctx, "ldd", p)
	if err != nil {
		return nil, fmt.Errorf("the docker CLI %s is dynamically linked and ldd could not list its libraries: %w", p, err)
	}
	libs, err := parseLdd(out)
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", p, err)
	}
	files := []file{{src: p, dst: "/usr/local/bin/docker"}}
	for _, l := range libs {
		files = append(files, file{src: l, dst: l})
	}
	return files, nil
}

// parseLdd returns the absolute paths in ldd's output: "libc.so.6 =>
// /lib/…/libc.so.6 (0x…)" and "/lib64/ld-linux-x86-64.so.2 (0x…)"; the
// vDSO has no file and is skipped; a library not found is an error.
func parseLdd(out []byte) ([]string, error) {
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.Contains(line, "statically linked") {
			continue
		}
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("missing library: %s", line)
		}
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "/") {
			continue // linux-vdso.so.1 (0x…)
		}
		libs = append(libs, f[0])
	}
	return libs, sc.Err()
}

// verify runs the image: the cumulus binary starts, and the docker CLI
// talks to the host's engine through the socket.
func verify(ctx context.Context, docker, tag string) error {
	vctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sock := DockerSocket()
	out, err := run(vctx, docker, "run", "--rm", "--network", "none", "--pull", "never", "-v", sock+":/var/run/docker.sock",
		"--entrypoint", "/bin/sh", tag, "-c",
		BinaryPath+` version >/dev/null && docker version --format '{{.Client.Version}} {{.Server.Version}}'`)
	if err != nil {
		return err
	}
	if f := strings.Fields(string(out)); len(f) != 2 {
		return fmt.Errorf("docker version inside the image printed %q", out)
	}
	return nil
}

// Image is what Inspect tells about a node image.
type Image struct {
	ID           string
	BinarySHA256 string // of the cumulus binary inside
	DockerCLI    string // version of the docker CLI inside
}

// Inspect describes the image tag; ErrNotFound if there is none.
func Inspect(ctx context.Context, tag string) (Image, error) { return inspect(ctx, "docker", tag) }

func inspect(ctx context.Context, docker, tag string) (Image, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := run(ctx, docker, "image", "inspect", "--format", "{{json .}}", tag)
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "no such image") {
			return Image{}, fmt.Errorf("%s: %w", tag, ErrNotFound)
		}
		return Image{}, fmt.Errorf("inspect node image %s: %w", tag, err)
	}
	var v struct {
		ID     string `json:"Id"`
		Config struct {
			Labels map[string]string
		}
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &v); err != nil {
		return Image{}, fmt.Errorf("inspect node image %s: %w", tag, err)
	}
	return Image{ID: v.ID, BinarySHA256: v.Config.Labels[LabelBinarySHA256], DockerCLI: v.Config.Labels[LabelDockerCLI]}, nil
}

// Exists reports whether the image tag is there.
func Exists(ctx context.Context, tag string) (bool, error) {
	_, err := Inspect(ctx, tag)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Ensure makes sure the node image tag exists: it builds it from the
// running binary when it is missing, and warns when it was built from
// another binary than the running one.
func Ensure(ctx context.Context, tag string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	img, err := Inspect(ctx, tag)
	if errors.Is(err, ErrNotFound) {
		log.Info("the node image is missing; building it from this cumulus binary", "tag", tag)
		if err := Build(ctx, tag, "", log); err != nil {
			return fmt.Errorf("%w (build it by hand with 'cumulus node-image build --tag %s')", err, tag)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if exe, err := os.Executable(); err == nil {
		if sum, err := FileSHA256(exe); err == nil && img.BinarySHA256 != sum {
			log.Warn("the node image was built from another cumulus binary than this one; rebuild it with 'cumulus node-image build' if nodes should run this version",
				"tag", tag)
		}
	}
	return nil
}

// FileSHA256 is the hex sha256 of a file's content.
func FileSHA256(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// DockerSocket is the host's Docker socket: the path of a unix://
// DOCKER_HOST, else /var/run/docker.sock.
func DockerSocket() string {
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok && h != "" {
		return h
	}
	return "/var/run/docker.sock"
}

func copyFile(dst, src string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src) // follows symlinks: the image gets the file
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}

// run runs a command and returns its stdout; a failure carries its stderr.
func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return stdout.Bytes(), fmt.Errorf("%s %s: %w", name, firstArg(args), err)
		}
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, firstArg(args), err, msg)
	}
	return stdout.Bytes(), nil
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// InstallSelf copies the running binary to dir/cumulus (made executable,
// written under a temporary name and renamed so a reader never sees half
// a binary) and returns that path.
func InstallSelf(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("install agent: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install agent: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return "", fmt.Errorf("install agent: %w", err)
	}
	defer src.Close()
	dst := filepath.Join(dir, "cumulus")
	tmp, err := os.CreateTemp(dir, ".cumulus-*")
	if err != nil {
		return "", fmt.Errorf("install agent: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return "", fmt.Errorf("install agent: %w", err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", fmt.Errorf("install agent: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("install agent: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("install agent: %w", err)
	}
	return dst, nil
}
