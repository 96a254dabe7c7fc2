package kubelab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Kubelet plays the pod side of a kubelet in one namespace: it reports
// each pod scheduled on a lab node Running with an address, runs its
// process, and reports its end.
type Kubelet struct {
	lab *Lab
	ns  string
	// Images maps an image's entrypoint paths to programs on this machine
	// (e.g. /usr/local/bin/cumulus to a freshly built cumulus).
	binaries map[string]string
	root     string // per-pod folders: <root>/<pod>/<volume>

	mu     sync.Mutex
	procs  map[string]*podProc // by pod UID
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

type podProc struct {
	cmd      *exec.Cmd
	done     chan struct{}
	stopping bool
}

// RunKubelet starts the stand-in kubelet for namespace ns. binaries maps
// paths inside images to programs here; root holds the pods' volumes and
// logs. Stop ends every process.
func (l *Lab) RunKubelet(ctx context.Context, ns string, binaries map[string]string, root string) (*Kubelet, error) {
	ctx, cancel := context.WithCancel(ctx)
	k := &Kubelet{lab: l, ns: ns, binaries: binaries, root: root, procs: map[string]*podProc{}, cancel: cancel}
	factory := informers.NewSharedInformerFactoryWithOptions(l.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.sync(ctx, obj) },
		UpdateFunc: func(_, obj any) { k.sync(ctx, obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("kubelet: pod cache not synced")
	}
	go func() { <-ctx.Done(); factory.Shutdown() }()
	return k, nil
}

// Stop kills every process the kubelet started and waits for them.
func (k *Kubelet) Stop() {
	k.cancel()
	k.mu.Lock()
	for _, p := range k.procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	k.mu.Unlock()
	k.wg.Wait()
}

func (k *Kubelet) sync(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || ctx.Err() != nil {
		return
	}
	uid := string(pod.UID)
	k.mu.Lock()
	p := k.procs[uid]
	k.mu.Unlock()
	switch {
	case pod.DeletionTimestamp != nil:
		k.terminate(ctx, pod, p)
	case p == nil && pod.Spec.NodeName != "" && (pod.Status.Phase == corev1.PodPending || pod.Status.Phase == ""):
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			k.markRunning(ctx, pod.DeepCopy())
		}()
	case p == nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "":
		k.mu.Lock()
		if k.procs[uid] != nil {
			k.mu.Unlock()
			return
		}
		p = &podProc{done: make(chan struct{})}
		k.procs[uid] = p
		k.mu.Unlock()
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			k.run(ctx, pod.DeepCopy(), p)
		}()
	}
}

// run starts the pod's first container and reports its end in the pod's
// status, as a kubelet would.
func (k *Kubelet) run(ctx context.Context, pod *corev1.Pod, p *podProc) {
	defer close(p.done)
	cmd, err := k.command(ctx, pod)
	if err != nil {
		k.reportEnd(ctx, pod, 128, "CreateContainerConfigError", err.Error())
		return
	}
	k.mu.Lock()
	p.cmd = cmd
	err = cmd.Start()
	k.mu.Unlock()
	if err != nil {
		k.reportEnd(ctx, pod, 128, "StartError", err.Error())
		return
	}
	err = cmd.Wait()
	k.mu.Lock()
	stopping := p.stopping
	k.mu.Unlock()
	if stopping || ctx.Err() != nil {
		return
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	k.reportEnd(ctx, pod, code, reason, "")
}

// command builds the process of the pod's first container: entrypoint
// mapped to a program here, environment resolved (values, secrets, the
// downward API), volume paths mapped under the pod's folder.
func (k *Kubelet) command(ctx context.Context, pod *corev1.Pod) (*exec.Cmd, error) {
	c := pod.Spec.Containers[0]
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("container %s has no command", c.Name)
	}
	prog, ok := k.binaries[argv[0]]
	if !ok {
		return nil, fmt.Errorf("no program here for %s of image %s", argv[0], c.Image)
	}
	dir := filepath.Join(k.root, pod.Name)
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		host := filepath.Join(dir, m.Name)
		if err := os.MkdirAll(host, 0o755); err != nil {
			return nil, err
		}
		mounts[m.MountPath] = host
	}
	mapPath := func(s string) string {
		for in, host := range mounts {
			if s == in || strings.HasPrefix(s, in+"/") {
				return host + strings.TrimPrefix(s, in)
			}
		}
		return s
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for _, e := range c.Env {
		v, err := k.envValue(ctx, pod, e)
		if err != nil {
			return nil, err
		}
		env = append(env, e.Name+"="+mapPath(v))
	}
	for i := range argv[1:] {
		argv[i+1] = mapPath(argv[i+1])
	}
	cmd := exec.Command(prog, argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	logf, err := os.Create(filepath.Join(k.root, pod.Name+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

func (k *Kubelet) envValue(ctx context.Context, pod *corev1.Pod, e corev1.EnvVar) (string, error) {
	src := e.ValueFrom
	switch {
	case src == nil:
		return e.Value, nil
	case src.FieldRef != nil:
		switch src.FieldRef.FieldPath {
		case "status.podIP":
			return pod.Status.PodIP, nil
		case "metadata.name":
			return pod.Name, nil
		case "metadata.namespace":
			return pod.Namespace, nil
		case "spec.nodeName":
			return pod.Spec.NodeName, nil
		}
		return "", fmt.Errorf("env %s: field %s not supported here", e.Name, src.FieldRef.FieldPath)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		// A kubelet waits for a missing secret; so does this one, a while.
		for i := 0; ; i++ {
			s, err := k.lab.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err == nil {
				v, ok := s.Data[ref.Key]
				if !ok && (ref.Optional == nil || !*ref.Optional) {
					return "", fmt.Errorf("env %s: secret %s has no key %s", e.Name, ref.Name, ref.Key)
				}
				return string(v), nil
			}
			if !apierrors.IsNotFound(err) || i >= 50 {
				return "", fmt.Errorf("env %s: secret %s: %w", e.Name, ref.Name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return "", fmt.Errorf("env %s: source not supported here", e.Name)
}

// terminate stops a deleted pod's process (SIGTERM, SIGKILL after the
// grace period) and then removes the pod, as a kubelet does.
func (k *Kubelet) terminate(ctx context.Context, pod *corev1.Pod, p *podProc) {
	k.mu.Lock()
	if p != nil && p.stopping {
		k.mu.Unlock()
		return
	}
	if p != nil {
		p.stopping = true
	}
	k.mu.Unlock()
	grace := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		if p != nil {
			k.mu.Lock()
			cmd := p.cmd
			k.mu.Unlock()
			if cmd != nil && cmd.Process != nil {
				_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
				select {
				case <-p.done:
				case <-time.After(grace):
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-p.done
				case <-ctx.Done():
					return
				}
			}
		}
		zero := int64(0)
		err := k.lab.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name,
			metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "kubelab: remove pod %s: %v\n", pod.Name, err)
		}
	}()
}

// reportEnd records the container's end in the pod's status (phase Failed or
// Succeeded), as a kubelet would.
func (k *Kubelet) reportEnd(ctx context.Context, pod *corev1.Pod, code int, reason, msg string) {
	for i := 0; i < 10 && ctx.Err() == nil; i++ {
		cur, err := k.lab.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || cur.UID != pod.UID || cur.DeletionTimestamp != nil {
			return
		}
		cur.Status.Phase = corev1.PodFailed
		if code == 0 {
			cur.Status.Phase = corev1.PodSucceeded
		}
		now := metav1.Now()
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, Message: msg, FinishedAt: now}}}}
		_, err = k.lab.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) {
			return
		}
	}
}
