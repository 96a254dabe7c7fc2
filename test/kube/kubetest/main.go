// Command kubetest runs a real Kubernetes control plane on 127.0.0.1 for
// the Kubernetes provider's tests: kube-apiserver with etcd embedded in
// the same process, and kube-scheduler and kube-controller-manager as child
// processes of the same binary. It is test tooling, never shipped.
//
//	kubetest up --dir DIR          start everything, write DIR/kubeconfig, run until killed
//	kubetest apiserver|scheduler|controller-manager FLAGS...
//	                               one component, with its own flags
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubetest up --dir DIR | apiserver|scheduler|controller-manager FLAGS...")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "up":
		if err := up(args); err != nil {
			fmt.Fprintln(os.Stderr, "kubetest:", err)
			os.Exit(1)
		}
	case "apiserver":
		cmd := apiserver.NewAPIServerCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "scheduler":
		cmd := scheduler.NewSchedulerCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "controller-manager":
		cmd := controllermanager.NewControllerManagerCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	default:
		fmt.Fprintf(os.Stderr, "kubetest: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

// up starts etcd, then the API server (both in this process), waits for
// /readyz, writes DIR/kubeconfig, starts the scheduler and the
// controller-manager, prints "ready" and runs until SIGTERM/SIGINT.
func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	dir := fs.String("dir", "", "state folder (etcd data, certificates, kubeconfig)")
	port := fs.Int("port", 0, "API server port on 127.0.0.1 (0: a free one)")
	controllers := fs.String("controllers", "serviceaccount,serviceaccount-token,namespace,garbagecollector,podgc,nodelifecycle", "controller-manager controllers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("--dir is required")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	*dir = abs
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	if *port == 0 {
		if *port, err = freePort(); err != nil {
			return err
		}
	}
	token, err := writeCredentials(*dir)
	if err != nil {
		return err
	}

	etcd, err := startEtcd(filepath.Join(*dir, "etcd"))
	if err != nil {
		return err
	}
	defer etcd.Close()

	server := "https://127.0.0.1:" + strconv.Itoa(*port)
	kubeconfig := filepath.Join(*dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, server, token); err != nil {
		return err
	}

	apiErr := make(chan int, 1)
	go func() {
		cmd := apiserver.NewAPIServerCommand()
		cmd.SetArgs([]string{
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(*port),
			"--advertise-address=127.0.0.1",
			"--cert-dir=" + filepath.Join(*dir, "certs"),
			"--etcd-servers=" + etcd.Clients[0].Addr().String(),
			"--service-cluster-ip-range=10.96.0.0/24",
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + filepath.Join(*dir, "sa.pub"),
			"--service-account-signing-key-file=" + filepath.Join(*dir, "sa.key"),
			"--token-auth-file=" + filepath.Join(*dir, "tokens.csv"),
			"--authorization-mode=RBAC",
			"--endpoint-reconciler-type=none",
			"--v=0",
		})
		apiErr <- cli.Run(cmd)
	}()
	if err := waitReady(server, token, apiErr); err != nil {
		return err
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	var children []*exec.Cmd
	defer func() {
		for _, c := range children {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range children {
			_ = c.Wait()
		}
	}()
	for _, c := range [][]string{
		{"scheduler", "--kubeconfig=" + kubeconfig, "--leader-elect=false",
			"--bind-address=127.0.0.1", "--secure-port=0", "--v=0"},
		{"controller-manager", "--kubeconfig=" + kubeconfig, "--leader-elect=false",
			"--bind-address=127.0.0.1", "--secure-port=0", "--use-service-account-credentials=false",
			"--service-account-private-key-file=" + filepath.Join(*dir, "sa.key"),
			"--controllers=" + *controllers, "--v=0"},
	} {
		cmd := exec.Command(self, c...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		// The components die with this process, whatever kills it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", c[0], err)
		}
		children = append(children, cmd)
	}
	fmt.Println("ready", server, kubeconfig)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
		return nil
	case code := <-apiErr:
		return fmt.Errorf("kube-apiserver exited with %d", code)
	}
}

// picked are the ports freePort handed out, none twice.
var picked = map[int]bool{}

// freePort returns a port free on 127.0.0.1 for a component to listen on
// later (etcd, the API server), drawn below Linux's default ephemeral
// range (32768–60999), as internal/freeport draws the test servers'
// ports: a port taken from the kernel (listen on :0, then close) is what
// the kernel may hand the next program that listens on :0 or connects
// out, and on a busy machine one of them took the API server's port in
// the seconds before it listened. Below the range only a program that
// names the port takes it.
func freePort() (int, error) {
	const low, high = 20000, 32768
	for range 1000 {
		p := low + mrand.IntN(high-low)
		if picked[p] {
			continue
		}
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			l.Close()
			picked[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free TCP port in %d-%d", low, high-1)
}

// writeCredentials writes the service-account key pair and a token file
// with one administrator (group system:masters); it returns the token.
func writeCredentials(dir string) (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return "", err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	line := token + ",admin,admin,system:masters\n"
	return token, os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(line), 0o600)
}

func startEtcd(dir string) (*embed.Etcd, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	curl, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(cport))
	purl, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(pport))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*curl}, []url.URL{*curl}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*purl}, []url.URL{*purl}
	cfg.InitialCluster = cfg.Name + "=" + purl.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("etcd not ready after a minute")
	}
}

func writeKubeconfig(path, server, token string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: kubetest
  context:
    cluster: kubetest
    user: admin
current-context: kubetest
`, server, token)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// waitReady polls /readyz until it answers ok.
func waitReady(server, token string, apiErr <-chan int) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the server's own self-signed test certificate
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case code := <-apiErr:
			return fmt.Errorf("kube-apiserver exited with %d before it was ready", code)
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready after 2 minutes")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
