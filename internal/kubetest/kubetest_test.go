package kubetest

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	authnv1 "k8s.io/api/authentication/v1"
)

// waitFor polls cond every 50 ms until it returns nil or d passes, and fails
// the test with cond's last error at the deadline.
func waitFor(t *testing.T, d time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		err := cond(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: %v", what, d, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ctxT returns a context that ends with the test or after a minute.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// whoami asks the server who cfg authenticates as.
func whoami(ctx context.Context, t *testing.T, cfg *rest.Config) authnv1.UserInfo {
	t.Helper()
	r, err := clientFor(t, cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return r.Status.UserInfo
}

func TestStartServesAdminAndKubeconfig(t *testing.T) {
	s := Start(t)
	t.Logf("kube-apiserver ready %v after exec", s.Ready)
	ctx := ctxT(t)
	v, err := s.Client(t).Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("ServerVersion: %v", err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("server version %q, want v1.37.2 (tools/kube-apiserver/go.mod)", v.GitVersion)
	}
	if u := whoami(ctx, t, s.Config()); u.Username != adminUser || !slices.Contains(u.Groups, "system:masters") {
		t.Errorf("Config() authenticates as %+v, want %s in system:masters", u, adminUser)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig())
	if err != nil {
		t.Fatalf("loading Kubeconfig(): %v", err)
	}
	if _, err := clientFor(t, cfg).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("get namespace default through Kubeconfig(): %v", err)
	}
	// The server's identity must be checked: a client that trusts only the
	// system roots does not connect.
	bad := s.Config()
	bad.TLSClientConfig.CAData = nil
	if _, err := clientFor(t, bad).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Error("a client without the test CA connected: the server's certificate is not being checked")
	}
}

func TestTokenConfigIdentityIsBoundByRBAC(t *testing.T) {
	s := Start(t)
	ctx := ctxT(t)
	arbiterCfg := s.TokenConfig("arbiter", "arbiter:schedulers")
	u := whoami(ctx, t, arbiterCfg)
	if u.Username != "arbiter" || !slices.Contains(u.Groups, "arbiter:schedulers") || !slices.Contains(u.Groups, "system:authenticated") {
		t.Fatalf("TokenConfig(arbiter, arbiter:schedulers) authenticates as %+v", u)
	}
	if slices.Contains(u.Groups, "system:masters") {
		t.Fatalf("a TokenConfig identity is in system:masters: %+v", u)
	}
	arbiter := clientFor(t, arbiterCfg)
	if _, err := arbiter.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list nodes before any grant: %v, want Forbidden", err)
	}

	// An unknown token is not authenticated at all.
	forged := s.Config()
	forged.BearerToken = "not-a-token-of-this-server"
	if _, err := clientFor(t, forged).CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("list nodes with a forged token: %v, want Unauthorized", err)
	}

	admin := s.Client(t)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "arbiter-node-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "arbiter:schedulers"}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the group's grant to take effect", func(ctx context.Context) error {
		_, err := arbiter.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err
	})
	// The grant is to list nodes, nothing more.
	if err := arbiter.CoreV1().Nodes().Delete(ctx, "any", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete a node with a list grant: %v, want Forbidden", err)
	}
	// Another identity, not in the group, got nothing.
	other := clientFor(t, s.TokenConfig("tenant-a"))
	if _, err := other.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list nodes as a user outside the granted group: %v, want Forbidden", err)
	}
}

// gpu is the extended resource the NVIDIA device plugin advertises.
const gpu corev1.ResourceName = "nvidia.com/gpu"

// gpuNode is a Node as a kubelet with NVIDIA's device plugin and GPU feature
// discovery would report it: n GPUs, Ready.
func gpuNode(name string, n int64) *corev1.Node {
	res := corev1.ResourceList{
		gpu:                   *resource.NewQuantity(n, resource.DecimalSI),
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"nvidia.com/gpu.product":      "NVIDIA-H100-80GB-HBM3",
			"nvidia.com/gpu.memory":       "81559",
			"topology.kubernetes.io/zone": "zone-a",
		}},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()}},
		},
	}
}

func allocatableGPUs(n *corev1.Node) int64 {
	q := n.Status.Allocatable[gpu]
	return q.Value()
}

func TestNodeGPUCapacityAndStatusSubresource(t *testing.T) {
	s := Start(t)
	ctx := ctxT(t)
	c := s.Client(t).CoreV1().Nodes()
	created, err := c.Create(ctx, gpuNode("gpu-1", 8), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	// A Node keeps the status it is created with (kubelet registers so).
	if got := allocatableGPUs(created); got != 8 {
		t.Fatalf("created node's allocatable %s = %d, want 8", gpu, got)
	}
	// No node-lifecycle controller runs to lift TaintNodesByCondition's
	// not-ready taint, so that plugin is off: a Node is as the test made it.
	if len(created.Spec.Taints) != 0 {
		t.Errorf("taints on a node created with none: %v", created.Spec.Taints)
	}

	// The status subresource updates status.
	created.Status.Allocatable[gpu] = *resource.NewQuantity(7, resource.DecimalSI)
	updated, err := c.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update node status: %v", err)
	}
	if got := allocatableGPUs(updated); got != 7 {
		t.Fatalf("allocatable after UpdateStatus = %d, want 7", got)
	}
	// The main resource ignores status: a label change with a stale status
	// keeps the stored status.
	updated.Labels["arbiter.dev/block"] = "b1"
	updated.Status.Allocatable[gpu] = *resource.NewQuantity(1, resource.DecimalSI)
	relabelled, err := c.Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update node: %v", err)
	}
	if relabelled.Labels["arbiter.dev/block"] != "b1" || allocatableGPUs(relabelled) != 7 {
		t.Fatalf("after Update: label %q, allocatable %d; want b1 and 7 (status only through nodes/status)",
			relabelled.Labels["arbiter.dev/block"], allocatableGPUs(relabelled))
	}
}

// BenchmarkStart measures Start with the binary cached: etcd, PKI, the
// server's start and /readyz. Each server stops only when the benchmark
// ends, so run it with a small -benchtime such as 3x.
func BenchmarkStart(b *testing.B) {
	Binary(b) // the build is not what is measured
	var ready time.Duration
	for b.Loop() {
		ready += Start(b).Ready
	}
	b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ms-exec-to-ready/op")
}
