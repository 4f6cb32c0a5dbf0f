package kube

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// EventQueue is how many Events wait to be recorded before new ones are
// dropped: Events are best effort, and a binding never waits on one (as
// client-go's event broadcaster, which also drops under pressure).
const EventQueue = 4096

// eventWorkers is how many Events are in flight at once.
const eventWorkers = 4

// EventSink records Events in the background, so that a cycle's bindings,
// evictions and conditions never wait on them. Its zero value is not
// usable; make one with NewEventSink.
type EventSink struct {
	client  kubernetes.Interface
	log     *slog.Logger
	queue   chan *corev1.Event
	dropped atomic.Int64
	pending atomic.Int64 // queued or being sent
	wg      sync.WaitGroup
}

// NewEventSink starts the sink's workers; they stop when ctx ends (Events
// still queued then are dropped; Wait waits for the workers).
func NewEventSink(ctx context.Context, client kubernetes.Interface, log *slog.Logger) *EventSink {
	s := &EventSink{client: client, log: log, queue: make(chan *corev1.Event, EventQueue)}
	for range eventWorkers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				select {
				case ev := <-s.queue:
					s.send(ctx, ev)
					s.pending.Add(-1)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return s
}

// Post queues an Event, or drops it when the queue is full.
func (s *EventSink) Post(ev *corev1.Event) {
	s.pending.Add(1)
	select {
	case s.queue <- ev:
	default:
		s.pending.Add(-1)
		if s.dropped.Add(1)%1000 == 1 && s.log != nil {
			s.log.Warn("events dropped: the API server is not keeping up", "dropped", s.dropped.Load())
		}
	}
}

// Dropped counts the Events dropped so far.
func (s *EventSink) Dropped() int64 { return s.dropped.Load() }

// Pending counts the Events queued or being sent: zero once every Event
// posted so far was recorded or dropped.
func (s *EventSink) Pending() int64 { return s.pending.Load() }

// Wait waits for the workers to stop (after ctx ended).
func (s *EventSink) Wait() { s.wg.Wait() }

func (s *EventSink) send(ctx context.Context, ev *corev1.Event) {
	if _, err := s.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil && s.log != nil {
		s.log.Debug("event not recorded", "pod", ev.InvolvedObject.Namespace+"/"+ev.InvolvedObject.Name, "err", err)
	}
}
