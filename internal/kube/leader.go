package kube

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLostLease is returned by RunLeader when this replica stopped being
// the leader: it must stop applying plans (the process exits and is
// restarted, as kube-scheduler does).
var ErrLostLease = errors.New("kube: lost the leader Lease")

// Lease configures leader election on a coordination.k8s.io Lease.
type Lease struct {
	Name, Namespace, Identity string
	// Duration, RenewDeadline and RetryPeriod are client-go's (defaults
	// 15 s, 10 s, 2 s as kube-scheduler's).
	Duration, RenewDeadline, RetryPeriod time.Duration
}

func (l *Lease) defaults() {
	if l.Duration <= 0 {
		l.Duration = 15 * time.Second
	}
	if l.RenewDeadline <= 0 {
		l.RenewDeadline = 10 * time.Second
	}
	if l.RetryPeriod <= 0 {
		l.RetryPeriod = 2 * time.Second
	}
}

// RunLeader runs run while this replica holds the Lease: only the leader
// schedules, so two replicas never both bind. It returns nil when ctx
// ends, ErrLostLease when the lease was lost while ctx was live.
func RunLeader(ctx context.Context, client kubernetes.Interface, l Lease, log *slog.Logger, run func(ctx context.Context)) error {
	l.defaults()
	if log == nil {
		log = slog.Default()
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.Identity},
	}
	lost := false
	var started atomic.Bool
	done := make(chan struct{})
	// ReleaseOnCancel is off: client-go releases the Lease while run may
	// still be binding; RunLeader releases it once run has returned.
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: l.Duration, RenewDeadline: l.RenewDeadline, RetryPeriod: l.RetryPeriod,
		Name: l.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				started.Store(true)
				defer close(done)
				log.Info("leading", "lease", l.Namespace+"/"+l.Name, "identity", l.Identity)
				run(ctx)
			},
			OnStoppedLeading: func() {
				lost = ctx.Err() == nil
				log.Info("stopped leading", "identity", l.Identity)
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	if started.Load() {
		<-done
		release(client, l)
	}
	if lost {
		return ErrLostLease
	}
	return nil
}

// release gives the Lease up, if this replica still holds it, so that the
// next replica need not wait for it to expire: as client-go's release, but
// only after run returned.
func release(client kubernetes.Interface, l Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), l.RenewDeadline)
	defer cancel()
	leases := client.CoordinationV1().Leases(l.Namespace)
	lease, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != l.Identity {
		return
	}
	one := int32(1)
	now := metav1.NowMicro()
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = nil, &one
	lease.Spec.RenewTime, lease.Spec.AcquireTime = &now, &now
	_, _ = leases.Update(ctx, lease, metav1.UpdateOptions{})
}
