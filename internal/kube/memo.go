package kube

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// SpecMemo remembers the workload spec each pod translated to, so that a
// cycle over 10,000 bound pods does not parse 10,000 pods' quantities and
// annotations again. An entry holds for the pod's resourceVersion (any
// change of the pod makes a new one) and for everything else the spec
// depends on: the workload's name, the namespace's tenant and the fleet's
// models and regions (the defaults of a pod that names none). Entries no
// cycle used are forgotten at the next one. Translate uses one from one
// goroutine.
type SpecMemo struct {
	prev, next map[types.UID]memoEntry
}

// memoKey is what an entry holds for.
type memoKey struct {
	uid         types.UID
	rv          string
	id          workload.ID
	tenant, ctx string
}

type memoEntry struct {
	key  memoKey
	spec workload.Spec
	err  error
}

// NewSpecMemo makes an empty memo.
func NewSpecMemo() *SpecMemo {
	return &SpecMemo{prev: map[types.UID]memoEntry{}, next: map[types.UID]memoEntry{}}
}

func (m *SpecMemo) get(k memoKey) (memoEntry, bool) {
	if k.uid == "" || k.rv == "" {
		return memoEntry{}, false // not from an API server: nothing to key on
	}
	if e, ok := m.next[k.uid]; ok && e.key == k {
		return e, true
	}
	e, ok := m.prev[k.uid]
	if !ok || e.key != k {
		return memoEntry{}, false
	}
	m.next[k.uid] = e
	return e, true
}

func (m *SpecMemo) put(k memoKey, e memoEntry) {
	if k.uid != "" && k.rv != "" {
		e.key = k
		m.next[k.uid] = e
	}
}

// rotate ends a cycle: what it used is kept, the rest forgotten.
func (m *SpecMemo) rotate() {
	m.prev, m.next = m.next, make(map[types.UID]memoEntry, len(m.next))
}

// Len is how many specs the memo holds (tests).
func (m *SpecMemo) Len() int { return len(m.prev) }

// memoContext is the part of a cycle that every pod's default spec
// depends on: the fleet's models and regions.
func memoContext(models []fleet.ModelID, regions []string) string {
	var b strings.Builder
	for _, m := range models {
		b.WriteString(string(m))
		b.WriteByte(',')
	}
	b.WriteByte('|')
	b.WriteString(strings.Join(regions, ","))
	return b.String()
}
