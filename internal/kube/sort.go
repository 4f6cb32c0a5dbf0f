package kube

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// sortByName puts a snapshot's lists in a fixed order (informer stores
// list in map order): the fleet's node order and every decision follow.
func sortByName(s *Snapshot) {
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].Name < s.Nodes[j].Name })
	sort.Slice(s.Namespaces, func(i, j int) bool { return s.Namespaces[i].Name < s.Namespaces[j].Name })
	for _, l := range [][]*unstructured.Unstructured{s.Tenants, s.Reservations, s.PodGroups, s.Policies} {
		sort.Slice(l, func(i, j int) bool {
			return l[i].GetNamespace() < l[j].GetNamespace() || l[i].GetNamespace() == l[j].GetNamespace() && l[i].GetName() < l[j].GetName()
		})
	}
}
